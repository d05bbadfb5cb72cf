"""Where long work runs: a local process pool (default) or Ray; one small interface for both.

    engine = get_engine("local")            # every core, no set-up
    engine = get_engine("ray")              # a local Ray instance; "ray://host:10001" a cluster
    for key, result, error in engine.run(task, {"key": (args...)}):
        ...

Tasks are module-level functions whose arguments and results are plain data: bytes (saved
executables, model files), strings, numbers, dicts and numpy arrays — never partita objects. A
task that raises is retried (``retries`` times) and then reported with its error; the others
still finish. Results arrive as they complete.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterator

from partita.errors import PartitaError


class EngineError(PartitaError):
    """An engine that cannot start (Ray not installed, a cluster that does not answer)."""


ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _one_blas_thread() -> None:
    """Worker initializer: one BLAS thread per worker (the pool already uses every core; a
    pool of multi-threaded BLAS workers thrashes: measured 0.75x vs 2.6x on 2 cores)."""
    os.environ.update(ONE_THREAD)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(1)


def _guarded(task: Callable, args: tuple) -> tuple[str, object]:
    """Run ``task`` in a worker; errors come back as text, not as pickled exceptions."""
    try:
        return "ok", task(*args)
    except Exception as exc:  # reported by name with the point that failed
        kind = "error" if isinstance(exc, PartitaError) else "internal error"
        return "error", f"{kind}: {type(exc).__name__}: {exc}"


class LocalEngine:
    """A process pool on this machine (``workers`` defaults to every core)."""

    name = "local"

    def __init__(self, workers: int | None = None, retries: int = 1):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.retries = retries

    def run(self, task: Callable, jobs: dict) -> Iterator[tuple[object, object, str | None]]:
        """Yield ``(key, result, error)`` as jobs finish; ``error`` is None on success."""
        if self.workers == 1:
            for key, args in jobs.items():
                yield key, *self._finish(task, args, _guarded(task, args))
            return
        # fork shares the imported partita with the workers (spawn would import it again per
        # worker); forkserver where fork is unavailable or unsafe (threads already running)
        methods = multiprocessing.get_all_start_methods()
        method = "fork" if "fork" in methods and threading.active_count() == 1 else "spawn"
        context = multiprocessing.get_context(method)
        with cf.ProcessPoolExecutor(
            self.workers, mp_context=context, initializer=_one_blas_thread
        ) as pool:
            futures = {
                pool.submit(_guarded, task, args): (key, args, 0) for key, args in jobs.items()
            }
            try:
                while futures:
                    done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
                    for future in done:
                        key, args, attempt = futures.pop(future)
                        status, value = _outcome(future)
                        if status != "ok" and attempt < self.retries:
                            futures[pool.submit(_guarded, task, args)] = (key, args, attempt + 1)
                            continue
                        yield key, *((value, None) if status == "ok" else (None, value))
            except BaseException:
                for future in futures:
                    future.cancel()
                pool.shutdown(wait=False, cancel_futures=True)
                raise

    def _finish(self, task, args, outcome):
        status, value = outcome
        for _ in range(self.retries):
            if status == "ok":
                break
            status, value = _guarded(task, args)
        return (value, None) if status == "ok" else (None, value)


def _outcome(future) -> tuple[str, object]:
    try:
        return future.result()
    except Exception as exc:  # the worker process died (killed, out of memory)
        return "error", f"worker failed: {type(exc).__name__}: {exc}"


class RayEngine:
    """The same jobs as Ray tasks, on a local Ray instance or an existing cluster."""

    def __init__(self, address: str | None = None, retries: int = 1, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise EngineError(
                "--engine ray needs Ray: pip install 'partita[ray]' (or pip install ray)"
            ) from None
        self.ray, self.retries = ray, retries
        self.name = f"ray ({address})" if address else "ray"
        if not ray.is_initialized():
            try:
                if address:
                    ray.init(address=address, log_to_driver=False)
                else:
                    ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)
            except Exception as exc:  # connection refused, bad address, ...
                raise EngineError(
                    f"cannot start or reach Ray at {address or 'local'}: {exc}"
                ) from None

    def run(self, task: Callable, jobs: dict) -> Iterator[tuple[object, object, str | None]]:
        ray = self.ray
        remote = ray.remote(max_retries=self.retries, retry_exceptions=False)(_guarded)
        pending = {remote.remote(task, args): (key, args, 0) for key, args in jobs.items()}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    key, args, attempt = pending.pop(ref)
                    try:
                        status, value = ray.get(ref)
                    except Exception as exc:  # a task whose worker died twice
                        status, value = "error", f"ray task failed: {type(exc).__name__}: {exc}"
                    if status != "ok" and attempt < self.retries:
                        pending[remote.remote(task, args)] = (key, args, attempt + 1)
                        continue
                    yield key, *((value, None) if status == "ok" else (None, value))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise


def get_engine(spec: str | None = "local", workers: int | None = None, retries: int = 1):
    """``"local"`` (default), ``"local:N"``, ``"ray"`` or ``"ray://HOST:PORT"``."""
    spec = spec or "local"
    if spec == "local" or spec.startswith("local:"):
        n = workers
        if spec.startswith("local:"):
            try:
                n = int(spec.split(":", 1)[1])
            except ValueError:
                raise EngineError(f"bad engine {spec!r}: write local:N with a number") from None
        return LocalEngine(n, retries)
    if spec == "ray":
        return RayEngine(None, retries, workers)
    if spec.startswith("ray://") or spec.startswith("ray:"):
        return RayEngine(spec, retries)
    raise EngineError(f"unknown engine {spec!r}: use local, local:N, ray or ray://HOST:PORT")


__all__ = ["EngineError", "LocalEngine", "RayEngine", "get_engine"]
