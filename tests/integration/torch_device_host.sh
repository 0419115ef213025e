#!/bin/sh
# Integration: the device half of kgate's torch runner (torch_device.py, as built beside kgate-run)
# driven on the host with a stand-in for the device (torch_device_host.py): a batched RUN's sets
# each with their own inputs and parameters, bound back after the batch, outputs right. The GPU
# itself is tests/gpu/kernelbench35.sh's. Skipped where no Python with torch is found.
set -u
. tests/integration/lib.sh
need_torch
py=$("$KGATE" doctor 2>/dev/null | sed -n 's/^  python    torch: \([^,]*\),.*/\1/p')
"${py:-/usr/bin/python3}" -I -B tests/integration/torch_device_host.py "$(cd "$B" && pwd)" \
	tests/data/kernelbench/layernorm.py >"$tmp/dev.out" 2>&1
rc=$?
grep -v "runtime is found" "$tmp/dev.out"
ok "torch_device.py's batched calls, on the host (exit $rc)" [ $rc -eq 0 ]
finish
