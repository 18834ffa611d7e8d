package main

// The packet path: tun device -> paths (forward) and paths -> tun device (receive), a batch of
// datagrams per system call on the UDP side.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"sort"
	"syscall"
	"unsafe"
)

// batchSize: datagrams per sendmmsg/recvmmsg.  A busy tunnel fills batches; an idle one sends
// each packet as soon as no other is queued, so batching adds no latency.
const batchSize = 64

// forward reads packets from the tun device and queues each on the path the scheduler picks; the
// queues go out (one sendmmsg per path) when the tun device has no more packets or a batch is full.
func (t *tunnel) forward() {
	runtime.LockOSThread()
	if err := syscall.SetNonblock(t.tun, true); err != nil {
		fatal("tun: %v", err)
	}
	bufs := make([][]byte, batchSize)
	for i := range bufs {
		bufs[i] = make([]byte, 65536+greLen)
	}
	for {
		n := 0
		for n < batchSize {
			buf := bufs[n]
			k, err := syscall.Read(t.tun, buf[greLen:])
			if err == syscall.EAGAIN {
				if n > 0 {
					break // send what is queued before waiting
				}
				waitReadable(t.tun)
				continue
			}
			if err == syscall.EINTR || (err == nil && k < 1) {
				continue
			}
			if err != nil {
				fatal("reading tun: %v", err)
			}
			proto := uint16(protoIPv4)
			if buf[greLen]>>4 == 6 {
				proto = protoIPv6
			}
			binary.BigEndian.PutUint32(buf[:greLen], uint32(proto))
			p := t.pick(buf[greLen : greLen+k])
			if p == nil {
				t.noPath.Add(1)
				continue
			}
			p.out.queue(buf[:greLen+k])
			n++
		}
		for _, p := range t.paths {
			if len(p.out.pkts) > 0 {
				sent, bytes := p.out.flush()
				p.txPackets.Add(uint64(sent))
				p.txBytes.Add(bytes - uint64(sent*greLen))
			}
		}
	}
}

// waitReadable blocks until fd has data (poll(2)).
func waitReadable(fd int) {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(fd), events: 0x1} // POLLIN
	for {
		_, _, errno := syscall.Syscall(syscall.SYS_POLL, uintptr(unsafe.Pointer(&pfd)), 1, ^uintptr(0)) // timeout -1
		if errno != syscall.EINTR {
			return
		}
	}
}

// pick: smooth weighted round robin over the live paths, or a flow hash weighted the same way.
// With no live path, every path is a candidate (a tunnel whose peer is not up yet still tries).
func (t *tunnel) pick(pkt []byte) *path {
	live := t.live[:0]
	for _, p := range t.paths {
		if p.alive.Load() {
			live = append(live, p)
		}
	}
	t.live = live
	if len(live) == 0 {
		live = t.paths
	}
	if t.hash {
		total := 0
		for _, p := range live {
			total += p.Weight
		}
		slot := int(flowHash(pkt) % uint32(total))
		for _, p := range live {
			if slot < p.Weight {
				return p
			}
			slot -= p.Weight
		}
	}
	var best *path
	total := 0
	for _, p := range live {
		p.current += p.Weight
		total += p.Weight
		if best == nil || p.current > best.current {
			best = p
		}
	}
	best.current -= total
	return best
}

// flowHash hashes addresses, protocol and (TCP/UDP) ports of an IPv4 or IPv6 packet.
func flowHash(pkt []byte) uint32 {
	h := fnv.New32a()
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		ihl := int(pkt[0]&0x0f) * 4
		h.Write(pkt[12:20])
		h.Write(pkt[9:10])
		if (pkt[9] == 6 || pkt[9] == 17) && len(pkt) >= ihl+4 {
			h.Write(pkt[ihl : ihl+4])
		}
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		h.Write(pkt[8:40])
		h.Write(pkt[6:7])
		if (pkt[6] == 6 || pkt[6] == 17) && len(pkt) >= 44 {
			h.Write(pkt[40:44])
		}
	}
	return h.Sum32()
}

// receive decapsulates what arrives on every path into the tun device.  One thread waits on all
// path sockets (epoll), takes a batch from each ready one (recvmmsg, runs coalesced by UDP_GRO)
// and writes the datagrams out interleaved, the i-th of every path before the (i+1)-th of any:
// the order round robin striped them in, where path by path would deliver a burst of each in turn.
func (t *tunnel) receive() {
	runtime.LockOSThread()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		fatal("epoll: %v", err)
	}
	for i, p := range t.paths {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(i)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.fd, &ev); err != nil {
			fatal("epoll: %v", err)
		}
	}
	events := make([]syscall.EpollEvent, len(t.paths))
	active := make([]int, 0, len(t.paths))
	got := make([]int, len(t.paths))
	pending := make([][][]byte, len(t.paths)) // per path, in arrival order
	for {
		ready, err := syscall.EpollWait(epfd, events, -1)
		if err != nil {
			continue // EINTR
		}
		active = active[:0]
		for _, ev := range events[:ready] {
			active = append(active, int(ev.Fd))
		}
		sort.Ints(active)
		for len(active) > 0 {
			most := 0
			for _, i := range active {
				in := t.paths[i].in
				got[i] = in.recv()
				pending[i] = pending[i][:0]
				for m := 0; m < got[i]; m++ {
					msg := &in.msgs[m]
					if !sameAddr(&in.names[m], msg.hdr.Namelen, &t.paths[i].rawPeer) {
						t.foreign.Add(1)
						continue
					}
					if msg.hdr.Flags&syscall.MSG_TRUNC != 0 {
						t.malformed.Add(1)
						continue
					}
					data, size := in.bufs[m][:msg.len], in.segment(m)
					for len(data) > size {
						pending[i] = append(pending[i], data[:size])
						data = data[size:]
					}
					pending[i] = append(pending[i], data)
				}
				if len(pending[i]) > most {
					most = len(pending[i])
				}
			}
			for j := 0; j < most; j++ {
				for _, i := range active {
					if j < len(pending[i]) {
						t.decapsulate(i, t.paths[i], pending[i][j])
					}
				}
			}
			still := active[:0]
			for _, i := range active { // a full batch may have left more queued; a partial one drained the socket
				if got[i] == len(t.paths[i].in.msgs) {
					still = append(still, i)
				}
			}
			active = still
		}
	}
}

func (t *tunnel) decapsulate(index int, p *path, pkt []byte) {
	if len(pkt) < greLen || pkt[0] != 0 || pkt[1] != 0 { // no checksum, key or sequence bits; version 0
		t.malformed.Add(1)
		return
	}
	body := pkt[greLen:]
	switch binary.BigEndian.Uint16(pkt[2:4]) {
	case protoIPv4, protoIPv6:
		version := byte(4)
		if binary.BigEndian.Uint16(pkt[2:4]) == protoIPv6 {
			version = 6
		}
		if len(body) < 20 || body[0]>>4 != version {
			t.malformed.Add(1)
			return
		}
		if version == 4 {
			completeChecksum(body)
		}
		if _, err := syscall.Write(t.tun, body); err == nil {
			p.rxPackets.Add(1)
			p.rxBytes.Add(uint64(len(body)))
		}
	case protoKeepalive:
		t.onKeepalive(index, p, body)
	default:
		t.malformed.Add(1)
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nestlab-mpt: "+format+"\n", args...)
	os.Exit(1)
}

// completeChecksum finishes an IPv4 TCP or UDP checksum left partial: a peer's kernel datapath sends a
// TCP burst's segments as the kernel made them for a device that would complete them (the field holds
// only the pseudo-header's sum).  A complete checksum that happens to equal that sum is recomputed to
// itself, so the test is safe; its cost is the pseudo-header's sum per packet.
func completeChecksum(pkt []byte) {
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || len(pkt) < ihl+8 || binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 { // fragments: left alone
		return
	}
	field := ihl + 16 // TCP
	switch pkt[9] {
	case 6:
		if len(pkt) < ihl+20 {
			return
		}
	case 17:
		field = ihl + 6
	default:
		return
	}
	length := len(pkt) - ihl
	pseudo := sum(pkt[12:20], uint32(pkt[9])+uint32(length))
	if binary.BigEndian.Uint16(pkt[field:]) != fold(pseudo) {
		return
	}
	pkt[field], pkt[field+1] = 0, 0
	binary.BigEndian.PutUint16(pkt[field:], ^fold(sum(pkt[ihl:], pseudo)))
}

func sum(b []byte, acc uint32) uint32 {
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
