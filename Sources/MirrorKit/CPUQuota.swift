/// The CPU time a cgroup quota allows this process, in cores (`cpu.max` of cgroup v2, or
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us` of cgroup v1), so that a sync in a container limited
/// to 2 CPUs on a 64-core host, or under a systemd timer with `CPUQuota=200%`, starts threads for
/// 2 cores, not 64 (``WorkerPool/coreCount``). The kernel documents both files in
/// Documentation/admin-guide/cgroup-v2.rst ("cpu.max") and scheduler/sched-bwc.rst.
///
/// The process's cgroup is read from `/proc/self/cgroup`, where the hierarchy is mounted from
/// `/proc/self/mountinfo` (a container sees its own cgroup as the mount's root). A quota set on
/// any ancestor applies too, so every level up to the root is read and the smallest quota wins.
/// Pure functions of the files' texts, with the reading passed in, so they are tested on texts.
public enum CPUQuota {
    /// The quota in cores (1.5 for `150000 100000`), or nil when none applies.
    public static func current() -> Double? {
        guard let cgroups = readSmallFile("/proc/self/cgroup"), let mounts = readSmallFile("/proc/self/mountinfo") else { return nil }
        return limit(cgroups: cgroups, mountinfo: mounts, read: readSmallFile)
    }

    /// The smallest quota of the cgroup named in `cgroups` and of its ancestors, in cores; `read`
    /// gives a file's text (nil when it cannot be read).
    static func limit(cgroups: String, mountinfo: String, read: (String) -> String?) -> Double? {
        var best: Double?
        func take(_ value: Double?) { if let value { best = min(best ?? value, value) } }
        for line in cgroups.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let controllers = fields[1].split(separator: ",")
            let path = String(fields[2])
            if fields[0] == "0" && fields[1].isEmpty {
                guard let mount = mountPoint(in: mountinfo, where: { type, _ in type == "cgroup2" }) else { continue }
                for folder in ancestors(of: path, below: mount.root) {
                    take(read(mount.point + folder + "/cpu.max").flatMap(cores(cpuMax:)))
                }
            } else if controllers.contains("cpu") {
                guard let mount = mountPoint(in: mountinfo, where: { type, options in
                    type == "cgroup" && options.split(separator: ",").contains("cpu")
                }) else { continue }
                for folder in ancestors(of: path, below: mount.root) {
                    let base = mount.point + folder + "/cpu.cfs_"
                    take(cores(quota: read(base + "quota_us"), period: read(base + "period_us")))
                }
            }
        }
        return best
    }

    /// `cpu.max`: `$MAX $PERIOD`, where `max` means no limit.
    static func cores(cpuMax text: String) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]) else { return nil }
        return cores(quota: quota, period: period)
    }

    /// cgroup v1: `cpu.cfs_quota_us` is -1 for no limit.
    static func cores(quota: String?, period: String?) -> Double? {
        guard let q = quota.flatMap({ Double($0.trimmingSpaces) }), let p = period.flatMap({ Double($0.trimmingSpaces) }) else { return nil }
        return cores(quota: q, period: p)
    }

    private static func cores(quota: Double, period: Double) -> Double? {
        guard quota > 0, period > 0, quota.isFinite, period.isFinite else { return nil }
        return quota / period
    }

    /// The cgroup's folder and each of its parents, as paths inside the mount (`/a/b`, `/a`, ``),
    /// after taking off the mount's root (a container's own cgroup is its mount's root).
    static func ancestors(of path: String, below root: String) -> [String] {
        var inside = path
        if root != "/" {
            // Not under the mount: the files there belong to another cgroup.
            guard inside == root || inside.hasPrefix(root + "/") else { return [] }
            inside = String(inside.dropFirst(root.count))
        }
        var components = inside.split(separator: "/").map(String.init)
        var out: [String] = []
        while true {
            out.append(components.isEmpty ? "" : "/" + components.joined(separator: "/"))
            if components.isEmpty { return out }
            components.removeLast()
        }
    }

    /// The first mount of `mountinfo` (proc(5): `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] -
    /// TYPE SOURCE SUPER`) that `matches` its type and super options; its mount point and root.
    static func mountPoint(in mountinfo: String, where matches: (Substring, Substring) -> Bool) -> (point: String, root: String)? {
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash >= 6, fields.count >= dash + 4 else { continue }
            if matches(fields[dash + 1], fields[dash + 3]) {
                return (unescape(fields[4]), unescape(fields[3]))
            }
        }
        return nil
    }

    /// mountinfo writes a space, tab, newline and backslash in a path as `\040`, `\011`, `\012`, `\134`.
    private static func unescape(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "\\"), i + 3 < utf8.count,
               let value = UInt8(String(decoding: utf8[(i + 1) ... (i + 3)], as: UTF8.self), radix: 8) {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A file of /proc or /sys, read whole (``WholeFile/read(_:limit:)`` reads on
    /// to the end, whatever size `fstat` reports: 0 or 4096 here).
    private static func readSmallFile(_ path: String) -> String? {
        (try? WholeFile.read(path)).map { String(decoding: $0, as: UTF8.self) }
    }
}
