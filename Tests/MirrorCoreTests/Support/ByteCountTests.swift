import Testing
import MirrorCore
import MirrorKit

/// `--segments-above` values (docs/cli.md, "Values of options").
@Suite struct ByteCountTests {
    @Test func sizesAreBinaryWithOrWithoutB() throws {
        #expect(try ByteCount(parsing: "64M").bytes == 64 << 20)
        #expect(try ByteCount(parsing: "512k").bytes == 512 << 10)
        #expect(try ByteCount(parsing: "1.5G").bytes == 3 << 29)
        #expect(try ByteCount(parsing: "2T").bytes == 2 << 40)
        #expect(try ByteCount(parsing: "1MiB").bytes == 1 << 20)
        #expect(try ByteCount(parsing: "1MB").bytes == 1 << 20)
        #expect(try ByteCount(parsing: "4096").bytes == 4096)
        #expect(try ByteCount(parsing: "0").bytes == 0)
    }

    @Test func anythingElseSaysWhatASizeIs() {
        for text in ["", "M", "lots", "-1M", "1e3", "0x10", "1P", "9000000T"] {
            #expect(throws: ArgumentValueError.notASize, "\(text.debugDescription)") { try ByteCount(parsing: text) }
        }
        #expect(ArgumentValueError.notASize.description.contains("64M, 1.5G or 4096"))
    }

    @Test func theDescriptionReadsBack() throws {
        for bytes in [0, 1000, 1024, 1536, 64 << 20, 3 << 29, 2 << 40] as [Int64] {
            let count = ByteCount(bytes: bytes)
            #expect(try ByteCount(parsing: count.description) == count, "\(count)")
        }
        #expect(ByteCount(bytes: 64 << 20).description == "64M")
    }
}
