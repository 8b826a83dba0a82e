"""Replica groups: which ranks must hold equal bits of each watched tensor.

In data-parallel training every rank holds the whole model and every rank
must agree. Sharded and model-parallel jobs hold different bits by design;
only the replicas of one piece must agree. For each tensor the state walk
(vqcheck.torch.Watch._tensors) asks this module for a Layout: the replica
group (the ranks that must agree, written as the trace line's `group`;
None is every rank) and the shard key (which piece this rank holds, the
line's `shard`; "" is the whole tensor). docs/trace-format.md "Replica
groups" has the format; docs/pytorch.md "Parallel layouts" the rules:

- DTensor (FSDP2's fully_shard, tensor parallel, any DeviceMesh): the local
  shard is digested; the key names the placements and this rank's mesh
  coordinate on every Shard/Partial dimension; the replicas are the ranks
  of the mesh that differ from this one only on Replicate dimensions (a
  fully replicated DTensor: its whole mesh).
- FSDP1 (FullyShardedDataParallel): FULL_SHARD and SHARD_GRAD_OP hold one
  shard of each flat parameter per rank of the FSDP group: no replica;
  HYBRID_SHARD's shard is replicated across its inter-node group; NO_SHARD
  is replicated across the FSDP group. Buffers are not sharded.
- DistributedDataParallel(process_group=g): the ranks of g.
- A pipeline stage's module (torch.distributed.pipelining): its stage's
  replicas, which only a data-parallel wrapper inside it names; without
  one, no replica.
- ZeroRedundancyOptimizer's local optimizer holds the state of this rank's
  partition only: no replica.
- BatchNorm's (and InstanceNorm's tracked) running_mean and running_var in
  a job of more than one rank: each rank updates them from its own batch
  (DistributedDataParallel copies rank 0's into the others only at the
  start of the next forward), so they differ at every step end by design:
  no replica, said as such. SyncBatchNorm's are reduced across the ranks
  and keep their group. num_batches_tracked stays compared.
- Anything else: every rank (group None), as before replica groups.

A group of one rank has no replica: the analysis counts it (`no_replica`)
and never calls it a divergence.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple


class Layout(NamedTuple):
    group: Optional[Tuple[int, ...]]  # sorted global ranks; None: all
    shard: str                        # "" for the whole tensor


WORLD = Layout(None, "")


def own_rank() -> int:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return 0


def no_replica(shard: str) -> Layout:
    """A piece only this rank holds."""
    return Layout((own_rank(),), shard)


def group_ranks(pg: Any) -> Optional[Tuple[int, ...]]:
    """The sorted global ranks of process group pg; None for the default
    (world) group, None too when torch cannot say."""
    import torch.distributed as dist
    if pg is None:
        return None
    try:
        if pg is dist.group.WORLD or \
                pg is dist.distributed_c10d._get_default_group():
            return None
        return tuple(sorted(int(r) for r in
                            dist.get_process_group_ranks(pg)))
    except Exception:
        return None


# ---- DTensor


def is_dtensor(t: Any) -> bool:
    """Whether t is a DTensor (torch.distributed.tensor; none in torch 1.x),
    told without importing anything new."""
    return hasattr(t, "_local_tensor") and hasattr(t, "placements") and \
        hasattr(t, "device_mesh")


def dtensor_local(t: Any) -> Tuple[Any, Layout]:
    """(the local shard, plain tensor, detached; its Layout)."""
    mesh, placements = t.device_mesh, t.placements
    ranks = mesh.mesh  # the global ranks, shaped as the mesh
    coord = mesh.get_coordinate()
    local = t._local_tensor.detach()
    if coord is None:  # not in this mesh: nothing of it is here
        return local, no_replica("not in mesh")
    names = mesh.mesh_dim_names or tuple(f"dim{d}" for d in
                                         range(ranks.ndim))
    index: List[Any] = []
    keys = []
    for d, p in enumerate(placements):
        if p.is_replicate():
            index.append(slice(None))
        else:
            index.append(coord[d])
            keys.append(f"{p}@{names[d]}={coord[d]}")
    group = tuple(sorted(int(r) for r in
                         ranks[tuple(index)].flatten().tolist()))
    return local, Layout(group, ",".join(keys))


# ---- module wrappers


def _fsdp1_layouts(module: Any, params: Dict[int, Layout],
                   buffers: Dict[int, Layout]) -> None:
    """FSDP1 instances at or under module: the Layout of every parameter
    they manage (flat parameters, and the original ones, which are views
    of them, with use_orig_params=True) and of their buffers."""
    for m in module.modules():  # outer first: inner instances override
        if type(m).__name__ != "FullyShardedDataParallel":
            continue
        strategy = getattr(getattr(m, "sharding_strategy", None), "name",
                           "FULL_SHARD")
        pg = getattr(m, "process_group", None)
        if strategy == "NO_SHARD":
            layout = Layout(group_ranks(pg), "")
            buffer_layout = layout
        else:
            shard = f"flat:{getattr(m, 'rank', own_rank())}/" \
                    f"{getattr(m, 'world_size', 1)}"
            if "HYBRID" in strategy:
                layout = Layout(group_ranks(getattr(m, "_inter_node_pg",
                                                    None)) or
                                (own_rank(),), shard)
                buffer_layout = WORLD
            else:
                layout = no_replica(shard)
                buffer_layout = Layout(group_ranks(pg), "")
        for p in m.parameters():
            params[id(p)] = layout
        handle = getattr(m, "_handle", None)
        flat = getattr(handle, "flat_param", None)
        if flat is not None:
            params[id(flat)] = layout
        for b in m.buffers():
            buffers[id(b)] = buffer_layout


def root_layout(module: Any, wrapper: Any, stage: Optional[int]) -> Layout:
    """The ranks that hold the same root module `module` (module_layouts'
    arguments): its DistributedDataParallel's group, its pipeline stage's,
    else every rank."""
    base = WORLD
    if wrapper is not None:
        base = Layout(group_ranks(getattr(wrapper, "process_group", None)),
                      "")
    elif stage is not None:
        base = no_replica(f"stage:{stage}")
    elif type(module).__name__ == "DistributedDataParallel":
        base = Layout(group_ranks(getattr(module, "process_group", None)), "")
    if stage is not None and base.group is not None:
        base = Layout(base.group, f"stage:{stage}")
    return base


def module_layouts(module: Any, wrapper: Any,
                   stage: Optional[int]) -> Tuple[Dict[int, Layout],
                                                  Dict[int, Layout]]:
    """{id(parameter): Layout}, {id(buffer): Layout} of the tensors of root
    module `module` that are not the whole world's (DTensors are told apart
    at the digest, dtensor_local). wrapper: the DistributedDataParallel
    around it, or None; stage: its pipeline stage index, or None."""
    params: Dict[int, Layout] = {}
    buffers: Dict[int, Layout] = {}
    base = root_layout(module, wrapper, stage)
    if base != WORLD:
        for p in module.parameters():
            params[id(p)] = base
        for b in module.buffers():
            buffers[id(b)] = base
    # DDP wrappers below the root (a pipeline stage's, a submodule's)
    for m in module.modules():
        if m is not module and \
                type(m).__name__ == "DistributedDataParallel":
            inner = Layout(group_ranks(getattr(m, "process_group", None)),
                           base.shard)
            for p in m.parameters():
                params[id(p)] = inner
            for b in m.buffers():
                buffers[id(b)] = inner
    _fsdp1_layouts(module, params, buffers)
    _batch_statistics_layouts(module, buffers)
    return params, buffers


# The shard key of running statistics kept per rank (the report lists it
# beside the tensor's name under "Not compared").
PER_RANK_STATISTICS = "per rank by design: running statistics of its own " \
                      "batches"


def _batch_statistics_layouts(module: Any, buffers: Dict[int, Layout]) -> None:
    """The running statistics of the norm layers at or under module that
    each rank updates from its own batch: no replica (see the module
    docstring). Nothing in a one-rank job."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()) or \
            dist.get_world_size() < 2:
        return
    from torch.nn.modules.batchnorm import _NormBase, SyncBatchNorm
    for m in module.modules():
        if not isinstance(m, _NormBase) or isinstance(m, SyncBatchNorm) or \
                not m.track_running_stats:
            continue
        for name in ("running_mean", "running_var"):
            b = m._buffers.get(name)
            if b is not None:
                buffers[id(b)] = no_replica(PER_RANK_STATISTICS)


# ---- what every rank must agree on, whatever the layout

# Optimizer hyper-parameters compared across all ranks, in this order,
# where a param group has them (a float or a tuple of floats).
HYPER_PARAMETERS = ("lr", "betas", "eps", "weight_decay", "momentum",
                    "dampening", "alpha", "rho", "lr_decay",
                    "initial_accumulator_value", "nesterov", "maximize",
                    "amsgrad")


def hyper_parameters(optimizer: Any) -> List[Tuple[str, List[float]]]:
    """The numbers every rank must agree on in `optimizer`'s param groups,
    one entry per hyper-parameter of HYPER_PARAMETERS that some group has:
    (its name, its value in each group that has it, in group order;
    booleans as 0/1, tuples flattened, a one-element tensor lr read)."""
    out: List[Tuple[str, List[float]]] = []
    for key in HYPER_PARAMETERS:
        numbers: List[float] = []
        present = False
        for group in optimizer.param_groups:
            if key not in group:
                continue
            value = group[key]
            values = value if isinstance(value, (tuple, list)) else (value,)
            for v in values:
                if isinstance(v, (bool, int, float)):
                    numbers.append(float(v))
                    present = True
                elif hasattr(v, "item") and getattr(v, "numel",
                                                    lambda: 0)() == 1:
                    numbers.append(float(v.item()))  # a tensor lr
                    present = True
        if present:
            out.append((key, numbers))
    return out
