// SPDX-License-Identifier: GPL-2.0
// nestlab-mpt's kernel datapath: the tunnel's packets never cross into the daemon.
//
// mpt_out (tc egress of the tun device): an IPv4 packet routed into the tunnel is wrapped in
// Ethernet / IPv4 / UDP / GRE (RFC 8086, the daemon's wire format) for the path the schedule
// names and redirected to that path's device, whose own qdisc (its shaping) then sends it.  A TCP
// burst (GSO) stays one buffer, marked as a UDP tunnel's, so that the kernel gives each segment the
// outer headers wherever it is cut; between two kernel datapaths on one machine it crosses the
// veth whole, as a VXLAN tunnel's bursts do.
// mpt_in (tc ingress of each path device): a GRE-in-UDP datagram from the path's peer carrying
// IPv4 loses its outer headers and is redirected into the tun device's ingress, as if the tunnel
// had received it.  Anything else (IPv6 inside, keepalives, fragments, strangers, a datagram larger
// than its path's MTU, a path whose peer's MAC is not known yet) is left to the daemon, which
// speaks the same format.
//
// The daemon fills the maps: the paths, the schedule (path indexes in smooth weighted round robin
// order over the live paths, or the slots a flow hash picks from) and the configuration; it reads
// the per-CPU counters.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_PATHS 64
#define MAX_SLOTS 1024
#define GRE_LEN 4
#define OUTER (sizeof(struct iphdr) + sizeof(struct udphdr) + GRE_LEN)
#define ENCAP (sizeof(struct ethhdr) + OUTER)

struct path {
	__u32 ifindex;
	__be32 local;
	__be32 remote;
	__u8 src_mac[ETH_ALEN];
	__u8 dst_mac[ETH_ALEN];
	__u32 ready; // the peer's MAC is known
	__u32 mtu;   // the path device's: a larger datagram is the daemon's (it fragments)
};

struct config {
	__u32 slots;       // schedule entries in use (0: everything to the daemon)
	__u32 tun_ifindex;
	__u32 hash;        // 1: per flow, 0: per packet
	__u16 port;        // UDP port, host order
	__u16 bursts;      // 1: the peer takes a TCP burst as one buffer (its kernel datapath), 0: it wants datagrams
	__u32 tun_mtu;
};

struct counters {
	__u64 tx_packets, tx_bytes, rx_packets, rx_bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PATHS);
	__type(key, __u32);
	__type(value, struct path);
} paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} schedule SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PATHS);
	__type(key, __u32);   // a path device's ifindex
	__type(value, __u32); // its path's index
} by_device SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} turn SEC(".maps"); // one count for every CPU: a flow's packets take the paths in turn whichever CPU sends them

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_PATHS);
	__type(key, __u32);
	__type(value, struct counters);
} stats SEC(".maps");

static __always_inline __u16 ip_checksum(struct iphdr *ip)
{
	__u16 *word = (__u16 *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += word[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

SEC("tc")
int mpt_out(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || !cfg->slots || skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	__u32 slot;
	if (cfg->hash) {
		slot = bpf_get_hash_recalc(skb) % cfg->slots;
	} else {
		__u32 *t = bpf_map_lookup_elem(&turn, &zero);
		if (!t)
			return TC_ACT_OK;
		slot = __sync_fetch_and_add(t, 1) % cfg->slots;
	}
	__u32 *index = bpf_map_lookup_elem(&schedule, &slot);
	if (!index)
		return TC_ACT_OK;
	__u32 which = *index;
	struct path *p = bpf_map_lookup_elem(&paths, &which);
	if (!p || !p->ready)
		return TC_ACT_OK;
	__u32 inner = skb->len, segments = 1;
	if (skb->gso_segs > 1 && !cfg->bursts)
		return TC_ACT_OK; // the daemon gets it segmented
	if (skb->gso_segs > 1) { // what the burst's segments will carry: its headers once more per segment
		__u8 head[33]; // an IPv4 header without options and the TCP header's data offset
		if (bpf_skb_load_bytes(skb, 0, head, sizeof(head)) == 0) {
			__u32 ihl = (head[0] & 0x0f) * 4;
			__u32 l4 = head[9] == IPPROTO_TCP && ihl == 20 ? (head[32] >> 4) * 4 : 8;
			segments = skb->gso_segs;
			inner += (segments - 1) * (ihl + l4);
		}
	}
	// A datagram the path cannot carry whole is the daemon's (it fragments); a TCP burst's segments are
	// as large as the tunnel's MTU allows.
	if (OUTER + (segments > 1 ? cfg->tun_mtu : inner) > p->mtu)
		return TC_ACT_OK;
	// The outer headers as a UDP tunnel the kernel knows, so a TCP burst (GSO) stays one buffer until the
	// path's device takes it, and each segment then gets the outer headers (GRE as the inner "L2" header).
	__u64 how = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L4_UDP |
		    BPF_F_ADJ_ROOM_ENCAP_L2(GRE_LEN);
	if (bpf_skb_adjust_room(skb, OUTER, BPF_ADJ_ROOM_MAC, how))
		return TC_ACT_OK;
	if (bpf_skb_change_head(skb, sizeof(struct ethhdr), 0))
		return TC_ACT_SHOT;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (data + ENCAP > end)
		return TC_ACT_SHOT;
	struct ethhdr *eth = data;
	__builtin_memcpy(eth->h_dest, p->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, p->src_mac, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);
	struct iphdr *ip = data + sizeof(*eth);
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(OUTER + inner);
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000); // DF, as the daemon's UDP socket sends
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->check = 0;
	ip->saddr = p->local;
	ip->daddr = p->remote;
	ip->check = ip_checksum(ip);
	struct udphdr *udp = (void *)ip + sizeof(*ip);
	udp->source = bpf_htons(cfg->port);
	udp->dest = bpf_htons(cfg->port);
	udp->len = bpf_htons(sizeof(*udp) + GRE_LEN + inner);
	udp->check = 0; // optional over IPv4
	__be32 *gre = (void *)udp + sizeof(*udp);
	*gre = bpf_htonl(ETH_P_IP);
	struct counters *c = bpf_map_lookup_elem(&stats, &which);
	if (c) {
		c->tx_packets += segments;
		c->tx_bytes += inner;
	}
	return bpf_redirect(p->ifindex, 0);
}

SEC("tc")
int mpt_in(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg || !cfg->tun_ifindex || skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	if (data + ENCAP + sizeof(struct iphdr) > end)
		return TC_ACT_OK;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || (ip->frag_off & bpf_htons(0x3fff)))
		return TC_ACT_OK;
	struct udphdr *udp = (void *)ip + sizeof(*ip);
	__be32 *gre = (void *)udp + sizeof(*udp);
	if (udp->dest != bpf_htons(cfg->port) || udp->source != bpf_htons(cfg->port) || *gre != bpf_htonl(ETH_P_IP))
		return TC_ACT_OK; // keepalives, IPv6 inside: the daemon's
	__u32 device = skb->ifindex;
	__u32 *index = bpf_map_lookup_elem(&by_device, &device);
	if (!index)
		return TC_ACT_OK;
	__u32 which = *index;
	struct path *p = bpf_map_lookup_elem(&paths, &which);
	if (!p || ip->saddr != p->remote || ip->daddr != p->local)
		return TC_ACT_OK; // a stranger: the daemon counts and drops it
	__u32 inner = bpf_ntohs(ip->tot_len) - OUTER;
	if (bpf_skb_adjust_room(skb, -(__s32)OUTER, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_FIXED_GSO))
		return TC_ACT_OK;
	struct counters *c = bpf_map_lookup_elem(&stats, &which);
	if (c) {
		c->rx_packets++;
		c->rx_bytes += inner;
	}
	return bpf_redirect(cfg->tun_ifindex, BPF_F_INGRESS);
}

char LICENSE[] SEC("license") = "GPL";
