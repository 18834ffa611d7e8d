package main

import "syscall"

// sysSendmmsg: sendmmsg(2).
const sysSendmmsg = syscall.SYS_SENDMMSG
