import MirrorModel

/// Content, for grouping the entries of a run that share it (docs/cli.md, "Reuse by content"):
/// the size and the first 128 bits of a digest. Two different files
/// that agree on these only cost a copy that then fails its check and is downloaded.
struct ContentKey: Hashable {
    var size: Int64
    var high: UInt64
    var low: UInt64

    init?(_ entry: ManifestEntry) {
        guard entry.size > 0, let digest = entry.digests[.sha256] ?? entry.digests[.sha512] else { return nil }
        guard let (high, low) = digest.withUnsafeBytes({ bytes -> (UInt64, UInt64)? in
            guard bytes.count >= 16 else { return nil }
            return (bytes[0 ..< 8].reduce(0) { $0 << 8 | UInt64($1) }, bytes[8 ..< 16].reduce(0) { $0 << 8 | UInt64($1) })
        }) else { return nil }
        (size, self.high, self.low) = (entry.size, high, low)
    }

    /// 64 bits of the key, for sorting: equal keys give equal values.
    var short: UInt64 { high ^ (UInt64(bitPattern: size) &* 0x9E37_79B9_7F4A_7C15) }
}
