"""The source of ``status(key)``, which reads a field of ``/proc/self/status``
in bytes: pasted at the head of the subprocess workers that measure RSS (a
fresh process, so that ``VmHWM`` starts at its exec)."""

STATUS = """
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
"""
