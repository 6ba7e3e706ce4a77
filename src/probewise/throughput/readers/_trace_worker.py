"""Worker process for reading one segment of a large plain Chrome trace.

Started by :mod:`probewise.throughput.readers._workers` as ``python -m
probewise.throughput.readers._trace_worker``; reads its request from stdin and writes its
result to stdout (both pickled; parent and child are the same installation).
"""

from probewise.throughput.readers._workers import worker_main

if __name__ == "__main__":
    worker_main()
