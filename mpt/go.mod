module nestlab/mpt

go 1.19
