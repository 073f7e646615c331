"""Before a multi-node replica serves, its group measures NCCL all-reduce bus bandwidth over
every GPU of every node and stops unless it reaches the threshold derived for the instance type.

Usage: python3 -c <this program> <GPUs per node> <threshold GB/s> <port>

Every pod of the LeaderWorkerSet group runs it as an init container, on the GPUs and EFA devices
its server gets next. LeaderWorkerSet gives each container LWS_LEADER_ADDRESS (the leader pod's
DNS name), LWS_GROUP_SIZE and LWS_WORKER_INDEX (0 on the leader). One process per GPU joins a
process group of every GPU of the group (the leader's rank 0 keeps the rendezvous on <port>),
all-reduces a 1 GiB buffer, and reports the slowest rank's bus bandwidth as NCCL's tests define
it (algorithm bandwidth x 2(n-1)/n). NCCL_NET in the environment decides the network: with it
set to the EFA plugin's name, a missing plugin fails here with NCCL's own message.
"""

import os
import sys
import time

MESSAGE_BYTES = 1 << 30
WARMUP = 5
ITERATIONS = 20
TIMEOUT_MINUTES = 15


def bus_bandwidth(message_bytes, seconds, ranks):
    """All-reduce bus bandwidth in GB/s (NCCL tests, doc/PERFORMANCE.md): the bytes each rank
    moves per second, times 2(n-1)/n."""
    if ranks < 2 or seconds <= 0:
        return 0.0
    return message_bytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def layout(environ, gpus):
    """(leader address, world size, this pod's first rank) from LeaderWorkerSet's variables."""
    leader = environ.get("LWS_LEADER_ADDRESS", "")
    size = environ.get("LWS_GROUP_SIZE", "")
    index = environ.get("LWS_WORKER_INDEX", "")
    if not leader or not size.isdigit() or not index.isdigit():
        raise ValueError(
            "LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and LWS_WORKER_INDEX must be set (this runs in a LeaderWorkerSet pod)"
        )
    size, index = int(size), int(index)
    if size < 2 or index >= size:
        raise ValueError(f"worker {index} of a group of {size}: a fabric check needs 2 or more nodes")
    return leader, size * gpus, index * gpus


def verdict(busbw, threshold):
    """The message to stop with, or None when the bandwidth reaches the threshold."""
    if busbw >= threshold:
        return None
    return (
        f"NCCL all-reduce bus bandwidth across the group is {busbw:.1f} GB/s, under the "
        f"{threshold:.1f} GB/s the instance type's EFA network carries at the least: NCCL is "
        "not using EFA (a missing aws-ofi-nccl plugin, EFA devices not in the pod) or the "
        "fabric is degraded. The group is recreated; see this container's log and the node's EFA devices"
    )


def measure(local_rank, leader, port, world, first, results):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(local_rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://{leader}:{port}",
        world_size=world,
        rank=first + local_rank,
        timeout=timedelta(minutes=TIMEOUT_MINUTES),
    )
    buffer = torch.ones(MESSAGE_BYTES // 4, dtype=torch.float32, device="cuda")
    for _ in range(WARMUP):
        dist.all_reduce(buffer)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(ITERATIONS):
        dist.all_reduce(buffer)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / ITERATIONS
    slowest = torch.tensor([bus_bandwidth(MESSAGE_BYTES, seconds, world)], device="cuda")
    dist.all_reduce(slowest, op=dist.ReduceOp.MIN)
    dist.destroy_process_group()
    results.put((local_rank, float(slowest.item())))


def main(argv, environ=os.environ):
    if len(argv) != 4:
        print("usage: check_fabric <GPUs per node> <threshold GB/s> <port>", file=sys.stderr)
        return 2
    try:
        gpus, threshold, port = int(argv[1]), float(argv[2]), int(argv[3])
        leader, world, first = layout(environ, gpus)
    except ValueError as e:
        print(f"fabric check: {e}", file=sys.stderr)
        return 2
    import multiprocessing

    # Forked before this process touches CUDA; each child opens its own GPU.
    context = multiprocessing.get_context("fork")
    results = context.SimpleQueue()
    children = [
        context.Process(target=measure, args=(r, leader, port, world, first, results))
        for r in range(gpus)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join()
    failed = [c.exitcode for c in children if c.exitcode != 0]
    if failed:
        print(
            f"fabric check: {len(failed)} of {gpus} GPU processes failed (exit codes {failed}); "
            "NCCL's message is above",
            file=sys.stderr,
        )
        return 1
    busbw = min(results.get()[1] for _ in range(gpus))
    problem = verdict(busbw, threshold)
    if problem:
        print(f"fabric check: {problem}", file=sys.stderr)
        return 1
    print(f"fabric check: {busbw:.1f} GB/s all-reduce bus bandwidth over {world} GPUs (at least {threshold:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
