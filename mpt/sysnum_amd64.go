package main

// sysSendmmsg: sendmmsg(2), which the syscall package of linux/amd64 does not name.
const sysSendmmsg = 307
