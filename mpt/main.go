// nestlab-mpt: a packet-level multipath tunnel in the style of MPT (seed 001).
//
// IP packets read from a tun device are encapsulated GRE-in-UDP (RFC 8086: a 4-byte GRE
// header, protocol 0x0800 or 0x86DD, in UDP to port 4754) and sent over one of N paths, each
// a UDP socket bound to its own local address (and device).  The path is chosen per packet
// by smooth weighted round robin, or per flow by a hash of the inner 5-tuple.  Every path
// carries keepalive requests (GRE protocol 0x88B5) that the peer echoes; a path without an
// echo for -dead is skipped until echoes return.  Datagrams from anyone but a path's peer,
// and malformed ones, are dropped and counted.  Counters are written as JSON to -stats.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

const (
	protoIPv4      = 0x0800
	protoIPv6      = 0x86DD
	protoKeepalive = 0x88B5 // IEEE local experimental EtherType
	kaRequest      = 1
	kaReply        = 2
	greLen         = 4
)

type path struct {
	Local, Remote, Dev string
	Weight             int
	fd                 int              // UDP socket bound to Local:port (and Dev)
	peer               syscall.Sockaddr // Remote:port
	peerIP             net.IP
	peerPort           int
	current            int // smooth WRR state (tun reader only)
	alive              atomic.Bool
	lastEcho           atomic.Int64
	rttNs              atomic.Int64
	txPackets, txBytes atomic.Uint64
	rxPackets, rxBytes atomic.Uint64
}

type tunnel struct {
	tun                        int
	paths                      []*path
	hash                       bool
	dead                       time.Duration
	malformed, foreign, noPath atomic.Uint64
	mu                         sync.Mutex
	live                       []*path // pick's scratch list (tun reader only)
}

type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, " ") }
func (p *pathList) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var specs pathList
	tunName := flag.String("tun", "mpt0", "tun device to create")
	port := flag.Int("port", 4754, "UDP port on every path, both ends (RFC 8086's GRE-in-UDP port)")
	scheduler := flag.String("scheduler", "wrr", "wrr: weighted round robin per packet; hash: per flow (inner 5-tuple)")
	interval := flag.Duration("keepalive", 100*time.Millisecond, "keepalive interval per path")
	dead := flag.Duration("dead", 400*time.Millisecond, "a path without an echoed keepalive for this long is skipped")
	stats := flag.String("stats", "", "file the counters are written to (JSON), every 200 ms and at exit")
	flag.Var(&specs, "path", "LOCAL_IP,REMOTE_IP[,DEV[,WEIGHT]] (repeat per path)")
	flag.Parse()
	if len(specs) == 0 || (*scheduler != "wrr" && *scheduler != "hash") {
		fmt.Fprintln(os.Stderr, "nestlab-mpt: give at least one -path, and -scheduler wrr or hash")
		os.Exit(2)
	}
	t := &tunnel{hash: *scheduler == "hash", dead: *dead}
	for _, spec := range specs {
		p, err := openPath(spec, *port)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nestlab-mpt: path %q: %v\n", spec, err)
			os.Exit(1)
		}
		t.paths = append(t.paths, p)
	}
	fd, name, err := openTun(*tunName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nestlab-mpt: tun %s: %v\n", *tunName, err)
		os.Exit(1)
	}
	t.tun = fd
	now := time.Now().UnixNano()
	for _, p := range t.paths {
		p.alive.Store(true)
		p.lastEcho.Store(now)
	}
	go t.receive()
	go t.keepalive(*interval)
	if *stats != "" {
		t.writeStats(*stats)
		go func() {
			for range time.Tick(200 * time.Millisecond) {
				t.writeStats(*stats)
			}
		}()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		if *stats != "" {
			t.writeStats(*stats)
		}
		os.Exit(0)
	}()
	fmt.Printf("ready %s\n", name)
	t.forward()
}

func openPath(spec string, port int) (*path, error) {
	f := strings.Split(spec, ",")
	if len(f) < 2 || len(f) > 4 {
		return nil, fmt.Errorf("want LOCAL_IP,REMOTE_IP[,DEV[,WEIGHT]]")
	}
	p := &path{Local: f[0], Remote: f[1], Weight: 1}
	if len(f) > 2 {
		p.Dev = f[2]
	}
	if len(f) > 3 {
		w, err := strconv.Atoi(f[3])
		if err != nil || w < 1 {
			return nil, fmt.Errorf("weight %q is not a positive integer", f[3])
		}
		p.Weight = w
	}
	remote := net.ParseIP(p.Remote)
	if remote == nil || net.ParseIP(p.Local) == nil {
		return nil, fmt.Errorf("addresses must be IPs")
	}
	p.peerIP, p.peerPort = remote, port
	family := syscall.AF_INET
	local, err := sockaddr(net.ParseIP(p.Local), port)
	if err == nil {
		p.peer, err = sockaddr(remote, port)
	}
	if err != nil {
		return nil, err
	}
	if _, v6 := local.(*syscall.SockaddrInet6); v6 {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 4<<20) // beyond rmem_max (root)
	_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, 4<<20)
	if p.Dev != "" {
		err = syscall.SetsockoptString(fd, syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, p.Dev)
	}
	if err == nil {
		err = syscall.Bind(fd, local)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	p.fd = fd
	return p, nil
}

// sockaddr: an IPv4 or IPv6 socket address.
func sockaddr(ip net.IP, port int) (syscall.Sockaddr, error) {
	if v4 := ip.To4(); v4 != nil {
		sa := &syscall.SockaddrInet4{Port: port}
		copy(sa.Addr[:], v4)
		return sa, nil
	}
	if v6 := ip.To16(); v6 != nil {
		sa := &syscall.SockaddrInet6{Port: port}
		copy(sa.Addr[:], v6)
		return sa, nil
	}
	return nil, fmt.Errorf("%v is not an IP address", ip)
}

func openTun(name string) (int, string, error) {
	fd, err := syscall.Open("/dev/net/tun", syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	var ifr [40]byte
	copy(ifr[:15], name)
	binary.LittleEndian.PutUint16(ifr[16:], 0x0001|0x1000) // IFF_TUN | IFF_NO_PI
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), 0x400454ca, uintptr(unsafe.Pointer(&ifr[0]))); errno != 0 {
		syscall.Close(fd)
		return -1, "", errno
	}
	return fd, strings.TrimRight(string(ifr[:16]), "\x00"), nil
}

// forward reads packets from the tun device and sends each on the path the scheduler picks.
func (t *tunnel) forward() {
	buf := make([]byte, 65536+greLen)
	for {
		n, err := syscall.Read(t.tun, buf[greLen:])
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			fmt.Fprintf(os.Stderr, "nestlab-mpt: reading tun: %v\n", err)
			os.Exit(1)
		}
		if n < 1 {
			continue
		}
		proto := uint16(protoIPv4)
		if buf[greLen]>>4 == 6 {
			proto = protoIPv6
		}
		binary.BigEndian.PutUint32(buf[:greLen], uint32(proto))
		p := t.pick(buf[greLen : greLen+n])
		if p == nil {
			t.noPath.Add(1)
			continue
		}
		if err := syscall.Sendto(p.fd, buf[:greLen+n], 0, p.peer); err == nil {
			p.txPackets.Add(1)
			p.txBytes.Add(uint64(n))
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

// receive decapsulates what arrives on every path into the tun device.  One thread waits on
// all path sockets (epoll) and drains the ready ones before waiting again, so a busy tunnel
// costs about one wake-up per burst rather than one per packet.  It takes one datagram from
// each ready path in turn: draining one path's socket before the next would deliver packets
// in per-path batches, out of the order round robin sent them in.
func (t *tunnel) receive() {
	runtime.LockOSThread()
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nestlab-mpt: epoll: %v\n", err)
		os.Exit(1)
	}
	for i, p := range t.paths {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(i)}
		if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, p.fd, &ev); err != nil {
			fmt.Fprintf(os.Stderr, "nestlab-mpt: epoll: %v\n", err)
			os.Exit(1)
		}
	}
	events := make([]syscall.EpollEvent, len(t.paths))
	active := make([]int, 0, len(t.paths))
	buf := make([]byte, 65536+greLen)
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
		for len(active) > 0 { // one datagram from each ready path in turn: the order the sender striped them
			still := active[:0]
			for _, index := range active {
				p := t.paths[index]
				n, from, err := syscall.Recvfrom(p.fd, buf, syscall.MSG_DONTWAIT)
				if err != nil {
					continue // EAGAIN: drained
				}
				t.decapsulate(index, p, buf[:n], from)
				still = append(still, index)
			}
			active = still
		}
	}
}

func (t *tunnel) decapsulate(index int, p *path, pkt []byte, from syscall.Sockaddr) {
	if !p.isPeer(from) {
		t.foreign.Add(1)
		return
	}
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

func (p *path) isPeer(from syscall.Sockaddr) bool {
	switch sa := from.(type) {
	case *syscall.SockaddrInet4:
		return sa.Port == p.peerPort && net.IP(sa.Addr[:]).Equal(p.peerIP)
	case *syscall.SockaddrInet6:
		return sa.Port == p.peerPort && net.IP(sa.Addr[:]).Equal(p.peerIP)
	}
	return false
}

func (t *tunnel) onKeepalive(index int, p *path, body []byte) {
	if len(body) != 10 || int(body[1]) >= len(t.paths) {
		t.malformed.Add(1)
		return
	}
	switch body[0] {
	case kaRequest: // echo it on the path it came by
		reply := make([]byte, greLen+10)
		binary.BigEndian.PutUint32(reply[:greLen], protoKeepalive)
		copy(reply[greLen:], body)
		reply[greLen] = kaReply
		_ = syscall.Sendto(p.fd, reply, 0, p.peer)
	case kaReply:
		if int(body[1]) != index {
			t.malformed.Add(1)
			return
		}
		now := time.Now().UnixNano()
		p.lastEcho.Store(now)
		p.rttNs.Store(now - int64(binary.BigEndian.Uint64(body[2:10])))
		p.alive.Store(true)
	default:
		t.malformed.Add(1)
	}
}

// keepalive sends a request on every path each interval and marks paths without echoes dead.
func (t *tunnel) keepalive(interval time.Duration) {
	msg := make([]byte, greLen+10)
	binary.BigEndian.PutUint32(msg[:greLen], protoKeepalive)
	msg[greLen] = kaRequest
	for range time.Tick(interval) {
		now := time.Now().UnixNano()
		for i, p := range t.paths {
			msg[greLen+1] = byte(i)
			binary.BigEndian.PutUint64(msg[greLen+2:], uint64(now))
			_ = syscall.Sendto(p.fd, msg, 0, p.peer)
			if now-p.lastEcho.Load() > int64(t.dead) {
				p.alive.Store(false)
			}
		}
	}
}

func (t *tunnel) writeStats(file string) {
	type pathStats struct {
		Local     string `json:"local"`
		Remote    string `json:"remote"`
		Dev       string `json:"dev"`
		Weight    int    `json:"weight"`
		Alive     bool   `json:"alive"`
		RttUs     int64  `json:"rtt_us"`
		TxPackets uint64 `json:"tx_packets"`
		TxBytes   uint64 `json:"tx_bytes"`
		RxPackets uint64 `json:"rx_packets"`
		RxBytes   uint64 `json:"rx_bytes"`
	}
	out := struct {
		Paths     []pathStats `json:"paths"`
		Malformed uint64      `json:"dropped_malformed"`
		Foreign   uint64      `json:"dropped_foreign"`
		NoPath    uint64      `json:"dropped_no_path"`
	}{Malformed: t.malformed.Load(), Foreign: t.foreign.Load(), NoPath: t.noPath.Load()}
	for _, p := range t.paths {
		out.Paths = append(out.Paths, pathStats{p.Local, p.Remote, p.Dev, p.Weight, p.alive.Load(), p.rttNs.Load() / 1000,
			p.txPackets.Load(), p.txBytes.Load(), p.rxPackets.Load(), p.rxBytes.Load()})
	}
	data, _ := json.MarshalIndent(out, "", " ")
	t.mu.Lock()
	defer t.mu.Unlock()
	tmp := file + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, file)
	}
}
