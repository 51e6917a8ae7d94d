package netproxy

import "net/netip"

var (
	// metadata are the cloud instance metadata services (AWS, GCP, Azure,
	// OpenStack on 169.254.169.254; AWS over IPv6; Alibaba): credentials
	// live there, so no rule reaches them.
	metadata = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"),
		netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200"),
	}
	broadcast   = netip.MustParseAddr("255.255.255.255")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	// nat64 embeds an IPv4 address in its last 32 bits: where NAT64 runs,
	// 64:ff9b::a9fe:a9fe is the metadata service.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// refusedAddr says why a resolved or literal address may not be dialed, or
// "" if it may. trusted addresses (from Rules.Hosts, or an IP literal an
// Allow entry names) may be loopback or link-local; nothing makes the
// metadata, unspecified, multicast or broadcast addresses reachable.
// IPv4-mapped IPv6 addresses are judged as the IPv4 address they carry.
func refusedAddr(a netip.Addr, trusted bool) string {
	a = a.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		if why := refusedAddr(netip.AddrFrom4([4]byte(b[12:])), trusted); why != "" {
			return why
		}
	}
	for _, m := range metadata {
		if a == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case a.IsUnspecified() || a.Is4() && thisNetwork.Contains(a):
		return "an unspecified address"
	case a.IsMulticast():
		return "a multicast address"
	case a == broadcast:
		return "the broadcast address"
	case trusted:
		return ""
	case a.IsLoopback():
		return "a loopback address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	}
	return ""
}
