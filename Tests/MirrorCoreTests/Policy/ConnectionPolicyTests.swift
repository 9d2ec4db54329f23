import Testing
@testable import MirrorCore

/// What counts against `--jobs`, `--connections` and `--segments`, and each transfer thread's
/// share (docs/cli.md, "Files, requests and connections").
@Suite struct ConnectionPolicyTests {
    func policy(jobs: Int = ConnectionPolicy.defaultFilesInFlight, connections: Int = ConnectionPolicy.defaultConnections,
                segments: Int = ConnectionPolicy.defaultSegments, threads: Int) -> ConnectionPolicy {
        ConnectionPolicy(filesInFlight: jobs, connectionsPerHost: connections, segments: segments, threadsWanted: threads)
    }

    @Test func theThreadsTogetherNeverOpenMoreThanTheConnections() {
        for connections in [1, 2, 3, 7, 16, 100, 256] {
            for threads in [1, 2, 3, 8, 64] {
                let p = policy(connections: connections, threads: threads)
                #expect(p.threads * p.connectionsPerThread <= connections, "\(connections) connections, \(threads) threads")
                #expect(p.threads >= 1 && p.connectionsPerThread >= 1)
            }
        }
        #expect(policy(connections: 2, threads: 8).threads == 2, "a thread needs a connection of its own")
        #expect(policy(threads: 8).connectionsPerThread == 2, "16 over 8 threads: two each, as HTTP/2 needs")
        #expect(policy(threads: 1).connectionsPerThread == 16)
    }

    @Test func requestsAreTheFilesInFlightOrOneFilesSegments() {
        #expect(policy(threads: 1).requests == 64)
        #expect(policy(jobs: 2, segments: 8, threads: 1).requests == 8, "one large file may widen to --segments")
        let p = policy(jobs: 64, threads: 3)
        #expect(p.requestsPerThread * p.threads >= p.requests)
        #expect(p.requestsPerThread == 22)
    }

    @Test func aSegmentTakesAConnectionOfItsOwnAndHTTPSRequestsWaitForTheFirst() {
        #expect(ConnectionPolicy.use(segment: true, url: "https://h/a") == .ownConnection)
        #expect(ConnectionPolicy.use(segment: true, url: "http://h/a") == .ownConnection)
        #expect(ConnectionPolicy.use(segment: false, url: "HTTPS://h/a") == .waitForMultiplexing)
        #expect(ConnectionPolicy.use(segment: false, url: "http://h/a") == .any)
        #expect(ConnectionPolicy.use(segment: false, url: "file:///a") == .any)
    }

    @Test func aHostGetsOneRequestPerConnectionUntilItIsKnownToMultiplex() {
        let p = policy(threads: 1)
        #expect(p.admits(runningForHost: 15, multiplexed: false))
        #expect(!p.admits(runningForHost: 16, multiplexed: false), "HTTP/1.1: the 17th waits at the thread, not in libcurl")
        #expect(p.admits(runningForHost: 16, multiplexed: true))
        #expect(p.admits(runningForHost: 63, multiplexed: true))
        #expect(!p.admits(runningForHost: 64, multiplexed: true), "HTTP/2: the thread's share of the files in flight")
        #expect(!policy(connections: 4, threads: 1).admits(runningForHost: 4, multiplexed: false), "--connections lowers it")
        #expect(p.streamsPerConnection >= 64)
    }
}
