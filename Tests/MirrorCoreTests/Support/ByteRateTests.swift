import Testing
import MirrorCore
import MirrorKit

/// `--limit-rate` values (docs/cli.md, "Values of options").
@Suite struct ByteRateTests {
    @Test func ratesAreBinaryBytesPerSecond() throws {
        #expect(try ByteRate(parsing: "500K").bytesPerSecond == 512_000)
        #expect(try ByteRate(parsing: "20M").bytesPerSecond == 20 << 20)
        #expect(try ByteRate(parsing: "1g").bytesPerSecond == 1 << 30)
        #expect(try ByteRate(parsing: "2MiB/s").bytesPerSecond == 2 << 20)
        #expect(try ByteRate(parsing: "1.5m").bytesPerSecond == 3 << 19)
        #expect(try ByteRate(parsing: "65536").bytesPerSecond == 65536)
    }

    @Test func zeroSaysHowToHaveNoLimit() {
        #expect(throws: ArgumentValueError.zeroRate) { try ByteRate(parsing: "0") }
        #expect(throws: ArgumentValueError.zeroRate) { try ByteRate(parsing: "0K") }
        #expect(ArgumentValueError.zeroRate.description.contains("leave the option out"))
    }

    @Test func anythingElseSaysWhatARateIs() {
        for text in ["", "fast", "-1M", "1e6", "0x10", "1000T"] {
            #expect(throws: ArgumentValueError.notARate, "\(text.debugDescription)") { try ByteRate(parsing: text) }
        }
        #expect(ArgumentValueError.notARate.description.contains("500K, 20M or 1G"))
    }
}
