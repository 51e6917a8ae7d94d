// Package netproxy is the filtering proxy through which sandboxed commands
// reach the network. The sandbox puts each confined command in a network
// namespace that holds only loopback and opens listeners inside it; this
// package serves those listeners (ServeHTTP, an HTTP proxy; ServeSOCKS, a
// SOCKS5 proxy) and owns every decision about what a command may reach:
// the matching of a composition's sandbox.network rules, name resolution
// (commands have no resolver of their own), the checks on the addresses a
// name leads to, the answers a refused client sees, and the history of
// attempts (Event, Mark, Since).
//
// # Rules
//
// Allow and Deny entries are "example.com" (that name only), "*.example.com"
// (every subdomain at any depth, not example.com itself), either with an
// optional ":port", or IP literals: "10.0.0.7", "127.0.0.1:4873", "::1",
// "[::1]:80". Case and a trailing dot do not count, a name beyond ASCII
// ("bücher.test") is its punycode ("xn--bcher-kva.test", what clients ask
// for; a request must be in that form); an entry without port
// matches every port; Deny wins over Allow; what no Allow entry matches is
// refused. A request for an IP literal (http://10.0.0.7/) matches IP-literal
// entries only, never a name. A Deny entry for an IPv4 address also names
// its IPv4-mapped IPv6 form (::ffff:10.0.0.7), and the other way round.
//
// # Addresses
//
// The proxy resolves names itself, checks every address, and dials the
// checked address, never the name again, so that a name cannot rebind
// between check and dial. Of several addresses it dials the acceptable ones
// in order; when none is acceptable the refusal gives the reason of the
// first (`localhost resolves to 127.0.0.1, a loopback address`).
//
//   - Always refused: the cloud metadata addresses (169.254.169.254,
//     fd00:ec2::254, 100.100.100.200), unspecified addresses (0.0.0.0/8, ::),
//     multicast and broadcast, and the same in IPv4-mapped IPv6 or NAT64
//     form (64:ff9b::/96, and the local-use 64:ff9b:1::/48 with the IPv4
//     address wherever RFC 6052 may put it).
//   - Refused unless trusted: loopback (127/8, ::1), link-local
//     (169.254/16, fe80::/10), also IPv4-mapped (::ffff:127.0.0.1), and
//     the addresses of this machine's interfaces (`me.lan resolves to
//     192.168.1.5, an address of this machine's`): the proxy dials from
//     the host, where they reach its own listeners as loopback does. An
//     address is trusted when Rules.Hosts gave it for the name (the user
//     wrote it), or when the request was for an IP literal that an Allow
//     entry names literally.
//   - Allowed: everything else the rules allow, private ranges included
//     (10/8, 172.16/12, 192.168/16, fc00::/7, and 100.64/10 of carrier-grade
//     NAT and tailnets), because internal package mirrors and registries
//     live there.
//   - A resolved address an IP-literal Deny entry names is refused too.
//
// # Limited mode
//
// Mode "limited" lets through plain HTTP GET, HEAD and OPTIONS only, so
// that a command can read but not send: other methods are refused (`limited
// mode allows only GET, HEAD and OPTIONS`), as is a request of those with a
// body (`limited mode sends no request body`), and so are CONNECT and
// SOCKS5, whose content the proxy cannot see (`limited mode cannot see
// inside an encrypted tunnel`). What a URL or a header carries still
// reaches the allowed hosts: limited mode keeps ordinary clients from
// uploading, it does not stop a command set on telling an allowed host
// something.
//
// # What a refused client sees
//
// Over HTTP, for requests and CONNECT alike: 403 with the header
// `X-Dsh-Denied: <rule>` and a text/plain body `dsh sandbox: network access
// to HOST denied: <rule>`. A name that does not resolve or a host that does
// not answer: 502 with the reason. Over SOCKS5: reply 0x02 (not allowed by
// ruleset) for a refusal, 0x04 for a resolution failure, 0x05 for a dial
// refused, 0x03 or 0x04 for another failed dial, 0x07 for BIND and UDP
// ASSOCIATE.
//
// # Connections
//
// Plain HTTP is forwarded with bodies streamed, hop-by-hop headers and
// Proxy-Authorization removed, and client keep-alive kept; there is no
// protocol switch (Upgrade) over plain HTTP, websocket clients use CONNECT.
// At most 512 client connections are served at once, HTTP and SOCKS5
// together (each holds descriptors of the host's); more wait until one
// ends. A request's head and an upstream answer's head are at most 256 KiB
// (431 and 502 past that). A client has 30 s to send its request head or
// SOCKS5 greeting; an idle keep-alive client connection ends after 2
// minutes. Tunnels (CONNECT,
// SOCKS5) last until either side ends them or the Proxy is closed. Close
// ends every listener, connection and tunnel.
//
// Every attempt, allowed or refused, gives one Event (for tunnels and
// forwarded requests when they end, with the bytes carried); a Proxy keeps
// its last 1024 events for Since.
package netproxy
