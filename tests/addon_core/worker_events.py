"""Reading a BakeWorker's events to the end, shared by the worker tests."""


def drain(worker, timeout=5.0):
    """Every event of ``worker`` up to its "done" or "error" (each within ``timeout`` s); joins the thread."""
    events = []
    while not events or events[-1].kind not in {"done", "error"}:
        event = worker.wait_event(timeout)
        assert event is not None, "worker went silent"
        events.append(event)
    worker.join(timeout)
    return events
