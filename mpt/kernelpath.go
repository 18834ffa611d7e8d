package main

// The kernel datapath (bpf/mpt.c): two tc programs, attached with tcx, carry the tunnel's IPv4
// packets between the tun device and the paths without waking the daemon.  The daemon keeps the
// control: it fills the programs' maps (paths, schedule, configuration), rebuilds the schedule when
// a path dies or comes back (keepalives, as before), learns each peer's MAC from the neighbour
// table, and adds the programs' per-CPU counters to its own.  What the programs leave alone (IPv6
// inside, keepalives, a path whose peer's MAC is not known yet) takes the userspace datapath.

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

//go:embed mpt.bpf.o
var program []byte

const maxSlots = 1024

// Mirrors of bpf/mpt.c's map values (no hidden padding: cilium/ebpf copies them as they are).
type bpfPath struct {
	Ifindex        uint32
	Local, Remote  [4]byte
	SrcMac, DstMac [6]byte
	Ready, Mtu     uint32
}

type bpfConfig struct {
	Slots, TunIfindex, Hash uint32
	Port, Bursts            uint16
	TunMtu                  uint32
}

type bpfCounters struct {
	TxPackets, TxBytes, RxPackets, RxBytes uint64
}

type kernelPath struct {
	coll    *ebpf.Collection
	links   []link.Link
	mu      sync.Mutex
	live    []bool // the alive set the schedule was built for
	cfg     bpfConfig
	tunName string
}

// openKernelPath loads the programs, fills the maps and attaches them; any failure leaves nothing
// attached and says why (the caller falls back to the userspace datapath).
func openKernelPath(t *tunnel, tunName string, port int, peerKernel bool) (*kernelPath, error) {
	for _, p := range t.paths {
		if net.ParseIP(p.Local).To4() == nil || p.Dev == "" {
			return nil, fmt.Errorf("path %s,%s: the kernel datapath takes IPv4 paths on named devices", p.Local, p.Remote)
		}
	}
	if len(t.paths) > 64 {
		return nil, fmt.Errorf("%d paths: the kernel datapath takes up to 64", len(t.paths))
	}
	_ = rlimit.RemoveMemlock() // kernels before 5.11 charge maps to RLIMIT_MEMLOCK
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(program))
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("loading: %w", err)
	}
	k := &kernelPath{coll: coll, live: make([]bool, len(t.paths)), tunName: tunName}
	tun, err := net.InterfaceByName(tunName)
	if err == nil {
		k.cfg = bpfConfig{TunIfindex: uint32(tun.Index), Port: uint16(port)}
		if peerKernel {
			k.cfg.Bursts = 1
		}
		if t.hash {
			k.cfg.Hash = 1
		}
		err = k.fill(t)
	}
	if err == nil {
		err = k.attach(uint32(tun.Index), ebpf.AttachTCXEgress, "mpt_out")
	}
	for _, p := range t.paths {
		if err != nil {
			break
		}
		var dev *net.Interface
		if dev, err = net.InterfaceByName(p.Dev); err == nil {
			err = k.attach(uint32(dev.Index), ebpf.AttachTCXIngress, "mpt_in")
		}
	}
	if err != nil {
		k.close()
		return nil, err
	}
	return k, nil
}

func (k *kernelPath) attach(ifindex uint32, where ebpf.AttachType, prog string) error {
	l, err := link.AttachTCX(link.TCXOptions{Interface: int(ifindex), Program: k.coll.Programs[prog], Attach: where})
	if err != nil {
		return fmt.Errorf("attaching %s: %w", prog, err)
	}
	k.links = append(k.links, l)
	return nil
}

// fill writes every path (its peer's MAC not known yet) and the schedule over all paths.
func (k *kernelPath) fill(t *tunnel) error {
	for i, p := range t.paths {
		dev, err := net.InterfaceByName(p.Dev)
		if err != nil {
			return err
		}
		entry := bpfPath{Ifindex: uint32(dev.Index), Mtu: uint32(dev.MTU)}
		copy(entry.Local[:], net.ParseIP(p.Local).To4())
		copy(entry.Remote[:], net.ParseIP(p.Remote).To4())
		copy(entry.SrcMac[:], dev.HardwareAddr)
		if err := k.coll.Maps["paths"].Put(uint32(i), entry); err != nil {
			return err
		}
		if err := k.coll.Maps["by_device"].Put(uint32(dev.Index), uint32(i)); err != nil {
			return err
		}
	}
	k.refresh(t)
	return nil
}

// refresh learns peers' MACs and paths' MTUs, and rebuilds the schedule when the set of live paths
// changed (the keepalive loop calls it every interval).
func (k *kernelPath) refresh(t *tunnel) {
	k.mu.Lock()
	defer k.mu.Unlock()
	macs := neighbours()
	mtus := map[string]int{} // one dump of the namespace's interfaces per tick
	if devices, err := net.Interfaces(); err == nil {
		for _, dev := range devices {
			mtus[dev.Name] = dev.MTU
		}
	}
	for i, p := range t.paths {
		var entry bpfPath
		if k.coll.Maps["paths"].Lookup(uint32(i), &entry) != nil {
			continue
		}
		changed := false
		if mtu, ok := mtus[p.Dev]; ok && uint32(mtu) != entry.Mtu {
			entry.Mtu, changed = uint32(mtu), true // a path's MTU may change while the tunnel runs
		}
		if mac, ok := macs[p.Dev+" "+p.Remote]; ok && (entry.Ready == 0 || !bytes.Equal(entry.DstMac[:], mac)) {
			copy(entry.DstMac[:], mac)
			entry.Ready, changed = 1, true
		}
		if changed {
			_ = k.coll.Maps["paths"].Put(uint32(i), entry)
		}
	}
	live := make([]bool, len(t.paths))
	any := false
	for i, p := range t.paths {
		live[i] = p.alive.Load()
		any = any || live[i]
	}
	if !any { // a tunnel whose peer is not up yet still tries every path
		for i := range live {
			live[i] = true
		}
	}
	if mtu, ok := mtus[k.tunName]; ok && uint32(mtu) != k.cfg.TunMtu {
		k.cfg.TunMtu, k.live = uint32(mtu), nil // nestlab sets the tunnel's MTU once the daemon is up
	}
	if k.cfg.Slots != 0 && k.live != nil && slices.Equal(live, k.live) {
		return
	}
	slots := schedule(t.paths, live)
	for i, index := range slots {
		_ = k.coll.Maps["schedule"].Put(uint32(i), index)
	}
	k.cfg.Slots = uint32(len(slots))
	if k.coll.Maps["config"].Put(uint32(0), k.cfg) == nil {
		k.live = live
	}
}

// schedule: the live paths' indexes in smooth weighted round robin order, one round of the weights
// (at most maxSlots entries); a flow hash picks among the same slots, so weights hold for both.
func schedule(paths []*path, live []bool) []uint32 {
	total := 0
	for i, p := range paths {
		if live[i] {
			total += p.Weight
		}
	}
	if total > maxSlots {
		total = maxSlots
	}
	current := make([]int, len(paths))
	out := make([]uint32, 0, total)
	for len(out) < total {
		best, sum := -1, 0
		for i, p := range paths {
			if !live[i] {
				continue
			}
			current[i] += p.Weight
			sum += p.Weight
			if best < 0 || current[i] > current[best] {
				best = i
			}
		}
		current[best] -= sum
		out = append(out, uint32(best))
	}
	return out
}

// neighbours: complete IPv4 neighbour entries of this namespace, "DEV IP" -> MAC (/proc/net/arp).
func neighbours() map[string]net.HardwareAddr {
	found := map[string]net.HardwareAddr{}
	f, err := os.Open("/proc/net/arp")
	if err != nil {
		return found
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Scan() // the heading
	for lines.Scan() {
		fields := strings.Fields(lines.Text()) // IP, HW type, flags, MAC, mask, device
		if len(fields) < 6 || fields[2] == "0x0" {
			continue
		}
		if mac, err := net.ParseMAC(fields[3]); err == nil {
			found[fields[5]+" "+fields[0]] = mac
		}
	}
	return found
}

// counters: path i's packets and bytes carried by the programs, summed over the CPUs.
func (k *kernelPath) counters(i int) (c bpfCounters) {
	var per []bpfCounters
	if k.coll.Maps["stats"].Lookup(uint32(i), &per) != nil {
		return c
	}
	for _, v := range per {
		c.TxPackets += v.TxPackets
		c.TxBytes += v.TxBytes
		c.RxPackets += v.RxPackets
		c.RxBytes += v.RxBytes
	}
	return c
}

// probeKernelPath: "bpf" when the programs load and attach here (tried on the loopback device of a
// network namespace made for the probe and gone with it), else "user: why".
func probeKernelPath() string {
	runtime.LockOSThread() // the namespace is this thread's alone; the thread ends with the process
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Sprintf("user: no network namespace for the probe (%v)", err)
	}
	_ = rlimit.RemoveMemlock()
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(program))
	if err != nil {
		return fmt.Sprintf("user: %v", err)
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return fmt.Sprintf("user: loading the programs: %v", err)
	}
	defer coll.Close()
	l, err := link.AttachTCX(link.TCXOptions{Interface: 1, Program: coll.Programs["mpt_out"], Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return fmt.Sprintf("user: attaching with tcx (Linux 6.6 or later): %v", err)
	}
	_ = l.Close()
	return "bpf"
}

func (k *kernelPath) close() {
	for _, l := range k.links {
		_ = l.Close()
	}
	k.coll.Close()
}
