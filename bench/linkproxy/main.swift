// linkproxy: the tests' distant link (``LinkProxy``, Tests/MirrorTestSupport/LinkProxy) as a
// program, for bench/wan and bench/mirrors. It listens on 127.0.0.1, prints the port it got on its
// first line, and carries connections to 127.0.0.1:TARGET with the round trip, the per-connection
// rate and the rate all connections share asked for, until SIGTERM or SIGINT. On exit it prints
// what it carried (connections, most open at once, bytes).
//
//   linkproxy TARGET-PORT [ROUND-TRIP-MS] [MBIT-PER-CONNECTION|-] [MBIT-TOTAL]
//
// `-` for MBIT-PER-CONNECTION: no per-connection cap, as for a mirror whose uplink alone is the
// limit (`linkproxy 8443 60 - 100`: every connection shares 100 Mbit/s each way).
#if canImport(Glibc)
import Glibc
#endif
import MirrorTestSupport

/// A line to standard output (1) or error (2), unbuffered: the bench reads the port before it goes on.
func say(_ line: String, to fd: Int32 = 2) {
    let bytes = Array((line + "\n").utf8)
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n <= 0 { return }
        done += n
    }
}

let args = CommandLine.arguments
guard args.count >= 2, let target = Int(args[1]), (1...65535).contains(target) else {
    say("usage: linkproxy TARGET-PORT [ROUND-TRIP-MS] [MBIT-PER-CONNECTION|-] [MBIT-TOTAL]")
    exit(64)
}
/// A rate argument: nil where absent or `-`, -1 where it is not a number.
func rate(_ index: Int) -> Double? {
    guard args.count > index, args[index] != "-" else { return nil }
    return Double(args[index]) ?? -1
}
let roundTrip = args.count > 2 ? (Double(args[2]) ?? -1) / 1000 : 0
let megabits = rate(3)
let totalMegabits = rate(4)
guard roundTrip >= 0, megabits.map({ $0 > 0 }) ?? true, totalMegabits.map({ $0 > 0 }) ?? true, args.count <= 5 else {
    say("linkproxy: the round trip is milliseconds (0 or more), each rate Mbit/s (more than 0) or -")
    exit(64)
}
var blocked = sigset_t()
sigemptyset(&blocked)
sigaddset(&blocked, SIGTERM)
sigaddset(&blocked, SIGINT)
// Blocked before any thread starts, so every proxy thread inherits the mask and sigwait gets them.
pthread_sigmask(SIG_BLOCK, &blocked, nil)
do {
    let link = LinkProxy.Link(roundTrip: roundTrip, bytesPerSecond: megabits.map(LinkProxy.Link.megabits),
                              totalBytesPerSecond: totalMegabits.map(LinkProxy.Link.megabits))
    let proxy = try LinkProxy(to: target, link: link)
    say("\(proxy.port)", to: 1)
    var received: Int32 = 0
    sigwait(&blocked, &received)
    let counts = proxy.counts
    _ = proxy.stop(timeout: 4)
    say("linkproxy: \(counts.accepted) connections, at most \(counts.mostOpen) open, \(counts.bytesDown) bytes down, \(counts.bytesUp) up")
} catch {
    say("linkproxy: \(error)")
    exit(1)
}
