"""Failure text in the shape real vLLM / PyTorch / NCCL print it (the signatures the cockpit looks for)."""

from __future__ import annotations

import os
import time

VLLM_VERSION = "0.11.2.dev37+gc687594b8"
PKG = "/usr/local/lib/python3.12/dist-packages"


class Fatal(Exception):
    """The process must exit with `code` (its logs are already written)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _frames(*frames: tuple[str, int, str, str]) -> str:
    out = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        out.append(f'  File "{PKG}/{path}", line {line}, in {func}')
        out.append(f"    {code}")
    return "\n".join(out)


def init_failed() -> str:
    return "\n".join(
        [
            _frames(
                (
                    "vllm/entrypoints/openai/api_server.py",
                    1920,
                    "run_server",
                    "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
                ),
                ("vllm/v1/engine/core_client.py", 642, "__init__", "super().__init__("),
                (
                    "vllm/v1/engine/utils.py",
                    880,
                    "wait_for_engine_startup",
                    'raise RuntimeError("Engine core initialization failed. "',
                ),
            ),
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]
    )


def nccl_timeout(tag: str, hca: str, gid: str, ip: str, peer: str) -> str:
    def mapped(addr: str) -> str:
        return f"::ffff:{addr}"

    warn = (
        f"Call to ibv_modify_qp failed with 110 Connection timed out, on dev {hca}:1, curr state INIT, "
        f"next state RTR, local GID index {gid}, local GID {mapped(ip)}, remote GID {mapped(peer)}"
    )
    return "\n".join(
        [
            f"{tag} misc/ibvwrap.cc:207 NCCL WARN {warn}",
            f"{tag} NCCL INFO transport/net_ib/connect.cc:1077 -> 2",
            f"{tag} NCCL INFO transport/net.cc:696 -> 2",
            f"{tag} NCCL INFO transport.cc:197 -> 2",
            f"{tag} NCCL INFO init.cc:1442 -> 2",
            _frames(
                (
                    "vllm/v1/executor/multiproc_executor.py",
                    559,
                    "worker_main",
                    "worker = WorkerProc(*args, **kwargs)",
                ),
                (
                    "vllm/distributed/parallel_state.py",
                    1161,
                    "init_distributed_environment",
                    "_WORLD = init_world_group(ranks, local_rank, backend)",
                ),
                ("vllm/distributed/device_communicators/pynccl.py", 140, "__init__", "self.all_reduce(data)"),
                (
                    "torch/distributed/distributed_c10d.py",
                    2810,
                    "all_reduce",
                    "work = group.allreduce([tensor], opts)",
                ),
            ),
            "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:3690, unhandled system error (run with NCCL_DEBUG=INFO for details), "
            "NCCL version 2.27.7",
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
            "device error. ",
            "Last error:",
            warn,
        ]
    )


def oom() -> str:
    return "\n".join(
        [
            _frames(
                (
                    "vllm/model_executor/model_loader/default_loader.py",
                    264,
                    "load_weights",
                    "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
                ),
                (
                    "vllm/model_executor/models/deepseek_v4.py",
                    1588,
                    "load_weights",
                    'param = param.to(device="cuda")',
                ),
            ),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total "
            "capacity of 119.70 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process "
            "has 113.41 GiB memory in use. Of the allocated memory 108.93 GiB is allocated by PyTorch, "
            "and 2.86 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
            "large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        ]
    )


def crash(proc: str) -> str:
    pid = os.getpid()
    return "\n".join(
        [
            f"({proc} pid={pid}) ERROR {time.strftime('%m-%d %H:%M:%S')} [multiproc_executor.py:654] "
            "WorkerProc hit an exception.",
            _frames(
                (
                    "vllm/v1/executor/multiproc_executor.py",
                    649,
                    "worker_busy_loop",
                    "output = func(*args, **kwargs)",
                ),
                (
                    "vllm/v1/worker/gpu_model_runner.py",
                    2411,
                    "execute_model",
                    "model_output = self._model_forward(",
                ),
                ("vllm/model_executor/layers/b12x_moe.py", 377, "forward", "torch.cuda.synchronize()"),
            ),
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.",
        ]
    )


def engine_dead() -> str:
    return "\n".join(
        [
            _frames(
                ("vllm/v1/engine/core.py", 711, "run_engine_core", "engine_core.run_busy_loop()"),
                ("vllm/v1/engine/core.py", 738, "run_busy_loop", "self._process_engine_step()"),
                (
                    "vllm/v1/executor/multiproc_executor.py",
                    243,
                    "get_response",
                    'raise RuntimeError("Worker failed with error: "',
                ),
            ),
            "RuntimeError: Worker failed with error 'Worker proc died unexpectedly', please check the "
            "stack trace above for the root cause",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
            "(above) for the root cause.",
        ]
    )


def store_bind_failure(addr: str, port: int, exc: OSError) -> str:
    return "\n".join(
        [
            _frames(("torch/distributed/rendezvous.py", 198, "_create_c10d_store", "return TCPStore(")),
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
            f"network address. port: {port}, useIpv6: false, code: -{exc.errno or 98}, name: EADDRINUSE, "
            "message: "
            f"{exc.strerror or 'address already in use'}",
        ]
    )


def store_timeout(seconds: int, joined: int, world: int) -> str:
    return "\n".join(
        [
            _frames(("torch/distributed/rendezvous.py", 198, "_create_c10d_store", "return TCPStore(")),
            f"torch.distributed.DistStoreError: Timed out after {seconds + 1} seconds waiting for clients. "
            f"{joined}/{world} clients joined.",
        ]
    )


def store_client_timeout(addr: str, port: int, seconds: int) -> str:
    stamp = time.strftime("%m%d %H:%M:%S")
    return "\n".join(
        [
            f"[W{stamp} socket.cpp:755] [c10d] The client socket has failed to connect to [{addr}]:{port} "
            "(errno: 111 - Connection refused).",
            _frames(("torch/distributed/rendezvous.py", 198, "_create_c10d_store", "return TCPStore(")),
            f"torch.distributed.DistStoreError: TCPStore recvValue failed: timed out after {seconds} seconds "
            f"connecting to [{addr}]:{port}; still retrying",
        ]
    )


def store_recv_failed(local: str, addr: str, port: int) -> str:
    stamp = time.strftime("%m%d %H:%M:%S")
    return "\n".join(
        [
            f"[W{stamp} TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=37, addr=[{local}]:41822, "
            f"remote=[{addr}]:{port}): failed to recv, got 0 bytes",
            _frames(
                (
                    "vllm/v1/executor/multiproc_executor.py",
                    623,
                    "worker_busy_loop",
                    "method, args, kwargs, output_rank = self.rpc_broadcast_mq.dequeue(",
                ),
                ("torch/distributed/distributed_c10d.py", 4159, "barrier", "work = group.barrier(opts=opts)"),
            ),
            "torch.distributed.DistStoreError: Failed to recv, got 0 bytes. Connection was likely closed. "
            "Did the remote server shutdown or crash?",
        ]
    )


def stop_api() -> str:
    """What uvicorn prints when the app's lifespan task is cancelled during shutdown (fault
    `traceback-on-stop` on the head): a traceback of a clean stop, exit code 0 all the same."""
    pid = os.getpid()
    return "\n".join(
        [
            f"(APIServer pid={pid}) ERROR:    Traceback (most recent call last):",
            f'  File "{PKG}/starlette/routing.py", line 701, in lifespan',
            "    await receive()",
            f'  File "{PKG}/uvicorn/lifespan/on.py", line 137, in receive',
            "    return await self.receive_queue.get()",
            '  File "/usr/lib/python3.12/asyncio/queues.py", line 158, in get',
            "    await getter",
            "asyncio.exceptions.CancelledError",
        ]
    )


def stop_worker() -> str:
    """A worker's message queue failing to close at exit (fault `traceback-on-stop` on a worker or a
    head that was not serving yet); exit code 0 all the same."""
    return "\n".join(
        [
            "Exception ignored in: <function MessageQueue.__del__ at 0xffff8c2b4e00>",
            _frames(
                (
                    "vllm/distributed/device_communicators/shm_broadcast.py",
                    329,
                    "__del__",
                    "self.shutdown()",
                ),
                (
                    "vllm/distributed/device_communicators/shm_broadcast.py",
                    318,
                    "shutdown",
                    "self.local_socket.close(linger=0)",
                ),
                ("zmq/sugar/socket.py", 185, "close", "super().close(linger=linger)"),
            ),
            "zmq.error.ZMQError: Socket operation on non-socket",
        ]
    )
