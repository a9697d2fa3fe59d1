"""The helper process of :class:`graphpipe.loading.compile.CompileJob`: runs the pickled
compile tasks read from stdin, in order, so that numba writes their kernels to its
on-disk cache while the parent process compiles others."""

import pickle
import sys

if __name__ == "__main__":
    for task in pickle.load(sys.stdin.buffer):
        task()
