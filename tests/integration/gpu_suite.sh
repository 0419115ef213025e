#!/bin/sh
# The CUDA suite inside `make test`: on a machine without a GPU it reports itself as skipped (77),
# on a GPU machine it runs what `make test-gpu` runs.
exec sh tests/gpu/run.sh
