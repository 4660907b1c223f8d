"""The source of ``streamed_arg(size, piece)`` and ``proc_kib(path, field)``,
pasted into the subprocess workers that measure memory (R12, R13).
``streamed_arg`` is a ``StreamAggregator`` fed one streamed call whose
``$.body`` is ``"x" * size``, in fragments of ``piece`` characters, and its end
marker; not closed. ``proc_kib`` reads a ``kB`` field of a /proc file."""

STREAMED_ARG = """
def proc_kib(path, field):
    with open(path) as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

def streamed_arg(size, piece=64 << 10):
    import json
    import fastagg

    def event(part, **more):
        return json.dumps({"candidates": [{"content": {"parts": [part]}, **more}]})

    agg = fastagg.StreamAggregator(deltas=False)
    agg.feed_event(event({"functionCall": {"name": "w", "willContinue": True}}))
    text = "x" * piece
    for _ in range(size // piece):
        agg.feed_event(event({"functionCall": {"partialArgs": [
            {"jsonPath": "$.body", "stringValue": text, "willContinue": True}],
            "willContinue": True}}))
    agg.feed_event(event({"functionCall": {}}, finishReason="STOP"))
    return agg
"""
