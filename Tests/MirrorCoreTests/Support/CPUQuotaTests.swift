import Testing
@testable import MirrorCore
@testable import MirrorKit

/// The CPU quota behind the default thread counts (``CPUQuota``, ``WorkerPool/coreCount``), from
/// the texts of `/proc/self/cgroup`, `/proc/self/mountinfo` and the cgroup files, as the kernel
/// writes them on a cgroup v2 host, a v1 host and inside a container.
struct CPUQuotaTests {
    static let v2Mounts = """
        22 1 0:21 / /proc rw,nosuid - proc proc rw
        30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
        """

    @Test func cpuMaxIsAQuotaOverAPeriod() {
        #expect(CPUQuota.cores(cpuMax: "max 100000\n") == nil)
        #expect(CPUQuota.cores(cpuMax: "200000 100000\n") == 2)
        #expect(CPUQuota.cores(cpuMax: "150000 100000") == 1.5)
        #expect(CPUQuota.cores(cpuMax: "0 100000") == nil)
        #expect(CPUQuota.cores(cpuMax: "garbage") == nil)
        #expect(CPUQuota.cores(quota: "-1\n", period: "100000\n") == nil)
        #expect(CPUQuota.cores(quota: "50000\n", period: "100000\n") == 0.5)
    }

    /// cgroup v2: the smallest quota on the way up wins, wherever it is set.
    @Test func theSmallestQuotaOfTheCgroupAndItsAncestorsWins() {
        let files = ["/sys/fs/cgroup/system.slice/mirror.service/cpu.max": "max 100000\n",
                     "/sys/fs/cgroup/system.slice/cpu.max": "300000 100000\n",
                     "/sys/fs/cgroup/cpu.max": "max 100000\n"]
        let limit = CPUQuota.limit(cgroups: "0::/system.slice/mirror.service\n", mountinfo: Self.v2Mounts) { files[$0] }
        #expect(limit == 3)
        let none = CPUQuota.limit(cgroups: "0::/user.slice\n", mountinfo: Self.v2Mounts) { _ in "max 100000" }
        #expect(none == nil)
    }

    /// In a container the cgroup is the mount's root: its own files are at the mount point.
    @Test func aContainersCgroupIsItsMountsRoot() {
        let mounts = "40 30 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw"
        let files = ["/sys/fs/cgroup/cpu.max": "150000 100000"]
        #expect(CPUQuota.limit(cgroups: "0::/docker/abc\n", mountinfo: mounts) { files[$0] } == 1.5)
        #expect(CPUQuota.ancestors(of: "/docker/abc/x", below: "/docker/abc") == ["/x", ""])
        #expect(CPUQuota.ancestors(of: "/", below: "/") == [""])
        // A cgroup outside the mount's root (another namespace's) has no files there to read.
        #expect(CPUQuota.ancestors(of: "/elsewhere", below: "/docker/abc") == [])
    }

    /// cgroup v1, with `cpu` and `cpuacct` mounted together and a space in the mount point.
    @Test func cgroupV1ReadsTheCFSFiles() {
        let mounts = """
            33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:8 - cgroup cgroup rw,cpu,cpuacct
            34 25 0:30 / /sys/fs/cgroup/cpu\\040set rw - cgroup cgroup rw,cpuset
            """
        let cgroups = "11:cpuset:/\n4:cpu,cpuacct:/lab/mirror\n0::/\n"
        let files = ["/sys/fs/cgroup/cpu,cpuacct/lab/mirror/cpu.cfs_quota_us": "-1\n",
                     "/sys/fs/cgroup/cpu,cpuacct/lab/mirror/cpu.cfs_period_us": "100000\n",
                     "/sys/fs/cgroup/cpu,cpuacct/lab/cpu.cfs_quota_us": "400000\n",
                     "/sys/fs/cgroup/cpu,cpuacct/lab/cpu.cfs_period_us": "100000\n"]
        #expect(CPUQuota.limit(cgroups: cgroups, mountinfo: mounts) { files[$0] } == 4)
        #expect(CPUQuota.mountPoint(in: mounts) { type, options in type == "cgroup" && options.contains("cpuset") }?.point
                == "/sys/fs/cgroup/cpu set")
    }

    @Test func theDefaultThreadCountIsAtLeastOne() {
        #expect(WorkerPool.coreCount >= 1)
    }
}
