package main

// Datagrams in batches: sendmmsg(2) and recvmmsg(2) move a batch per system call, and UDP
// segmentation offload (UDP_SEGMENT on send, UDP_GRO on receive) carries a run of equal-sized
// datagrams for one path through the stack as one buffer, split into datagrams only where a
// device needs them.

import (
	"encoding/binary"
	"syscall"
	"unsafe"
)

const (
	solUDP       = 17
	udpSegment   = 103 // UDP_SEGMENT: send a buffer as datagrams of this size
	udpGRO       = 104 // UDP_GRO: receive runs of datagrams as one buffer, with their size
	maxSegments  = 64  // UDP_MAX_SEGMENTS of the oldest kernels that have UDP_SEGMENT
	maxGSOBytes  = 65000
	cmsgHdrLen   = 16 // struct cmsghdr on 64-bit Linux
	cmsgSpaceLen = 24 // a cmsghdr and up to 8 bytes of data
)

// mmsghdr is struct mmsghdr: a msghdr and the byte count the kernel fills in.
type mmsghdr struct {
	hdr syscall.Msghdr
	len uint32
	_   [4]byte
}

// sender queues one path's datagrams and sends them with one sendmmsg: each run of equal-sized
// datagrams (the last may be shorter) as one message with UDP_SEGMENT where the kernel has it.
type sender struct {
	fd    int
	peer  syscall.Sockaddr        // for the rare datagram sent on its own
	to    *syscall.RawSockaddrAny // the same, as a msghdr points at it
	toLen uint32
	gso   bool
	pkts  [][]byte
	msgs  []mmsghdr
	iovs  []syscall.Iovec
	ctrl  [][cmsgSpaceLen]byte
	segs  []int // datagrams in each message
}

func newSender(fd int, peer syscall.Sockaddr, to *syscall.RawSockaddrAny, toLen uint32, size int) *sender {
	s := &sender{fd: fd, peer: peer, to: to, toLen: toLen, pkts: make([][]byte, 0, size), msgs: make([]mmsghdr, size),
		iovs: make([]syscall.Iovec, size), ctrl: make([][cmsgSpaceLen]byte, size), segs: make([]int, size)}
	// The kernel has UDP segmentation offload if it takes the option (Linux >= 4.18).
	s.gso = syscall.SetsockoptInt(fd, solUDP, udpSegment, 0) == nil
	return s
}

func (s *sender) queue(pkt []byte) { s.pkts = append(s.pkts, pkt) }

// flush sends what is queued: the datagrams and bytes the kernel took.  A message the kernel
// refuses as a whole (a run longer than the path's MTU allows, say) goes again a datagram at a
// time; a datagram it refuses (a path whose device is down) is dropped.
func (s *sender) flush() (sent int, bytes uint64) {
	n := 0 // messages
	for i := 0; i < len(s.pkts); {
		size, run, total := len(s.pkts[i]), 1, len(s.pkts[i])
		for s.gso && i+run < len(s.pkts) && run < maxSegments && total+len(s.pkts[i+run]) <= maxGSOBytes && len(s.pkts[i+run]) <= size {
			total += len(s.pkts[i+run])
			run++
			if len(s.pkts[i+run-1]) < size {
				break // a shorter datagram ends a run
			}
		}
		s.message(n, i, run, size)
		n++
		i += run
	}
	first := 0 // datagram index of message m
	for m := 0; m < n; {
		k, _, errno := syscall.Syscall6(sysSendmmsg, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msgs[m])), uintptr(n-m), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 { // message m was refused
			if s.segs[m] > 1 {
				for _, pkt := range s.pkts[first : first+s.segs[m]] {
					if syscall.Sendto(s.fd, pkt, 0, s.peer) == nil {
						sent++
						bytes += uint64(len(pkt))
					}
				}
			}
			first += s.segs[m]
			m++
			continue
		}
		for ; k > 0; k-- {
			sent += s.segs[m]
			bytes += uint64(s.msgs[m].len)
			first += s.segs[m]
			m++
		}
	}
	s.pkts = s.pkts[:0]
	return sent, bytes
}

// message makes message m of the datagrams pkts[i:i+run], segmented at size if run > 1.
func (s *sender) message(m, i, run, size int) {
	h := &s.msgs[m].hdr
	*h = syscall.Msghdr{Name: (*byte)(unsafe.Pointer(s.to)), Namelen: s.toLen, Iov: &s.iovs[i], Iovlen: uint64(run)}
	for j := i; j < i+run; j++ {
		s.iovs[j].Base = &s.pkts[j][0]
		s.iovs[j].SetLen(len(s.pkts[j]))
	}
	s.segs[m] = run
	if run > 1 {
		c := s.ctrl[m][:]
		binary.LittleEndian.PutUint64(c[0:], cmsgHdrLen+2) // cmsg_len (host order: Linux/amd64, arm64)
		binary.LittleEndian.PutUint32(c[8:], solUDP)
		binary.LittleEndian.PutUint32(c[12:], udpSegment)
		binary.LittleEndian.PutUint16(c[16:], uint16(size))
		h.Control, h.Controllen = &c[0], cmsgSpaceLen
	}
}

// receiver reads one path's datagrams with recvmmsg, runs of them coalesced (UDP_GRO) where the kernel can.
type receiver struct {
	fd    int
	msgs  []mmsghdr
	iovs  []syscall.Iovec
	bufs  [][]byte
	names []syscall.RawSockaddrAny
	ctrl  [][cmsgSpaceLen]byte
}

func newReceiver(fd int, size int) *receiver {
	_ = syscall.SetsockoptInt(fd, solUDP, udpGRO, 1) // without it, one datagram per message
	r := &receiver{fd: fd, msgs: make([]mmsghdr, size), iovs: make([]syscall.Iovec, size), bufs: make([][]byte, size),
		names: make([]syscall.RawSockaddrAny, size), ctrl: make([][cmsgSpaceLen]byte, size)}
	for i := range r.msgs {
		r.bufs[i] = make([]byte, 65536+greLen)
		r.iovs[i].Base = &r.bufs[i][0]
		r.iovs[i].SetLen(len(r.bufs[i]))
		r.msgs[i].hdr.Iov, r.msgs[i].hdr.Iovlen = &r.iovs[i], 1
		r.msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		r.msgs[i].hdr.Control = &r.ctrl[i][0]
	}
	return r
}

// recv reads what is queued without waiting: the number of messages (0 when none is).
func (r *receiver) recv() int {
	for i := range r.msgs {
		r.msgs[i].hdr.Namelen = syscall.SizeofSockaddrAny
		r.msgs[i].hdr.Controllen = cmsgSpaceLen
		r.msgs[i].hdr.Flags = 0
	}
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVMMSG, uintptr(r.fd), uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)),
			syscall.MSG_DONTWAIT, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return 0
		}
		return int(n)
	}
}

// segment: the size message i's datagrams were coalesced at (UDP_GRO), or its whole length.
func (r *receiver) segment(i int) int {
	h := &r.msgs[i].hdr
	c := r.ctrl[i][:]
	if h.Controllen >= cmsgHdrLen+2 && binary.LittleEndian.Uint32(c[8:]) == solUDP && binary.LittleEndian.Uint32(c[12:]) == udpGRO {
		if size := int(binary.LittleEndian.Uint16(c[16:])); size > 0 {
			return size
		}
	}
	return int(r.msgs[i].len)
}

// rawAddr converts a socket address to the raw form a msghdr points at.
func rawAddr(sa syscall.Sockaddr) (syscall.RawSockaddrAny, uint32) {
	var raw syscall.RawSockaddrAny
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		r := (*syscall.RawSockaddrInet4)(unsafe.Pointer(&raw))
		r.Family = syscall.AF_INET
		r.Port = htons(uint16(a.Port))
		r.Addr = a.Addr
		return raw, syscall.SizeofSockaddrInet4
	case *syscall.SockaddrInet6:
		r := (*syscall.RawSockaddrInet6)(unsafe.Pointer(&raw))
		r.Family = syscall.AF_INET6
		r.Port = htons(uint16(a.Port))
		r.Addr = a.Addr
		return raw, syscall.SizeofSockaddrInet6
	}
	return raw, 0
}

// sameAddr: whether the sender the kernel filled in is the raw address want (family, port, address).
func sameAddr(got *syscall.RawSockaddrAny, gotLen uint32, want *syscall.RawSockaddrAny) bool {
	switch want.Addr.Family {
	case syscall.AF_INET:
		g, w := (*syscall.RawSockaddrInet4)(unsafe.Pointer(got)), (*syscall.RawSockaddrInet4)(unsafe.Pointer(want))
		return gotLen >= syscall.SizeofSockaddrInet4 && g.Family == w.Family && g.Port == w.Port && g.Addr == w.Addr
	case syscall.AF_INET6:
		g, w := (*syscall.RawSockaddrInet6)(unsafe.Pointer(got)), (*syscall.RawSockaddrInet6)(unsafe.Pointer(want))
		return gotLen >= syscall.SizeofSockaddrInet6 && g.Family == w.Family && g.Port == w.Port && g.Addr == w.Addr
	}
	return false
}

// htons swaps to or from network byte order, as a raw address's port field holds it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return *(*uint16)(unsafe.Pointer(&b[0]))
}
