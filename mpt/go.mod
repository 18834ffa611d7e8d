module nestlab/mpt

go 1.25.0

require github.com/cilium/ebpf v0.22.0

require golang.org/x/sys v0.43.0
