"""Resumable runs: answers that outlive their connection (ASSIST_DETACH_GRACE; docs/resumable.md).

    POST /assist -> ResumableEventStream (stream.py): the run, read by the response while its
        client is there, by a task of DetachedRuns (keeper.py) once it left; every batch kept
        in a KeptRun (kept.py, this process: memory.py) and, with ASSIST_REDIS_URL, copied to a
        Redis Stream (redis_buffer.py, every replica)
    GET /assist/runs/<handle> (routes.py): a FrameSource (source.py) over either, from a cursor
    DELETE /assist/runs/<handle>: the run stopped, where it runs

Off (ASSIST_DETACH_GRACE=0, the default) none of this is imported: /assist is as it always was.
"""
