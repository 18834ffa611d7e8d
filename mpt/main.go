// nestlab-mpt: a packet-level multipath tunnel in the style of MPT (seed 001).
//
// IP packets read from a tun device are encapsulated GRE-in-UDP (RFC 8086: a 4-byte GRE
// header, protocol 0x0800 or 0x86DD, in UDP to port 4754) and sent over one of N paths, each
// a UDP socket bound to its own local address (and device).  The path is chosen per packet
// by smooth weighted round robin, or per flow by a hash of the inner 5-tuple.  Every path
// carries keepalive requests (GRE protocol 0x88B5) that the peer echoes; a path without an
// echo for -dead is skipped until echoes return.  Datagrams from anyone but a path's peer,
// and malformed ones, are dropped and counted.  Counters are written as JSON to -stats.
//
// The UDP side moves datagrams in batches (sendmmsg, recvmmsg: datapath.go, mmsg.go), so a busy
// tunnel costs about one system call per packet, its read or write on the tun device.  Where the
// kernel allows (tcx, BPF), tc programs carry IPv4 in the kernel instead (kernelpath.go, bpf/mpt.c),
// and this process keeps the control: keepalives, failover, weights, counters.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
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
	fd                 int                    // UDP socket bound to Local:port (and Dev)
	peer               syscall.Sockaddr       // Remote:port
	rawPeer            syscall.RawSockaddrAny // the same, raw: what a msghdr points at and the kernel gives a sender
	out                *sender                // datagrams queued for this path (tun reader only)
	in                 *receiver              // (path reader only)
	current            int                    // smooth WRR state (tun reader only)
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
	live                       []*path     // pick's scratch list (tun reader only)
	kernel                     *kernelPath // the kernel datapath, when it could be attached
	datapath                   string      // "bpf" or "user", and why not bpf
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
	datapath := flag.String("datapath", "auto", "bpf: tc programs carry IPv4 in the kernel; user: this process; auto: bpf where the kernel allows")
	peer := flag.String("peer-datapath", "auto", "the other end's datapath: with user, TCP bursts are cut into datagrams before they leave")
	probe := flag.Bool("probe", false, "say which datapath this kernel gives (bpf, or user and why) and exit")
	flag.Parse()
	if *probe {
		fmt.Println(probeKernelPath())
		return
	}
	if len(specs) == 0 || (*scheduler != "wrr" && *scheduler != "hash") || (*datapath != "auto" && *datapath != "bpf" && *datapath != "user") {
		fmt.Fprintln(os.Stderr, "nestlab-mpt: give at least one -path, -scheduler wrr or hash, -datapath auto, bpf or user")
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
	t.datapath = "user"
	if *datapath != "user" {
		kernel, err := openKernelPath(t, name, *port, *peer != "user")
		switch {
		case err == nil:
			t.kernel, t.datapath = kernel, "bpf"
		case *datapath == "bpf":
			fmt.Fprintf(os.Stderr, "nestlab-mpt: kernel datapath: %v\n", err)
			os.Exit(1)
		default:
			t.datapath = fmt.Sprintf("user (kernel datapath: %v)", err)
		}
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
	var rawLen uint32
	p.rawPeer, rawLen = rawAddr(p.peer)
	p.out, p.in = newSender(fd, p.peer, &p.rawPeer, rawLen, batchSize), newReceiver(fd, batchSize/4)
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
		if t.kernel != nil {
			t.kernel.refresh(t)
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
		Datapath  string      `json:"datapath"`
		Paths     []pathStats `json:"paths"`
		Malformed uint64      `json:"dropped_malformed"`
		Foreign   uint64      `json:"dropped_foreign"`
		NoPath    uint64      `json:"dropped_no_path"`
	}{Datapath: t.datapath, Malformed: t.malformed.Load(), Foreign: t.foreign.Load(), NoPath: t.noPath.Load()}
	for i, p := range t.paths {
		var k bpfCounters // what the kernel datapath carried, beside what this process did
		if t.kernel != nil {
			k = t.kernel.counters(i)
		}
		out.Paths = append(out.Paths, pathStats{p.Local, p.Remote, p.Dev, p.Weight, p.alive.Load(), p.rttNs.Load() / 1000,
			p.txPackets.Load() + k.TxPackets, p.txBytes.Load() + k.TxBytes, p.rxPackets.Load() + k.RxPackets, p.rxBytes.Load() + k.RxBytes})
	}
	data, _ := json.MarshalIndent(out, "", " ")
	t.mu.Lock()
	defer t.mu.Unlock()
	tmp := file + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, file)
	}
}
