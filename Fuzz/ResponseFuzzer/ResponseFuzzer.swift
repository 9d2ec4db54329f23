// Fuzz target "response": the HTTP response checks: header-line parsing (Download.parseHeaderLine,
// what CURLOPT_HEADERFUNCTION feeds), Content-Range, Content-Length and Retry-After parsing, and
// the verdict ResponseCheck gives before a body byte is written.
//
// Input format (text, so the corpus is readable): a first line "STATUS OFFSET SIZE" (the status
// libcurl reports, the offset of our Range request, the entry's size in the manifest; unparsable
// numbers count as 0), then the raw header lines, each ending with "\n".

func fuzzResponse(_ bytes: [UInt8]) {
    var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) + [0x0A] }
    guard !lines.isEmpty else { return }
    let numbers = String(decoding: lines.removeFirst().dropLast(), as: UTF8.self).split(separator: " ").map { Int64($0) ?? 0 }
    let status = Int(truncatingIfNeeded: numbers.count > 0 ? numbers[0] : 200)
    let offset = numbers.count > 1 ? numbers[1] : 0
    let expectedSize = numbers.count > 2 ? numbers[2] : 0

    var headers: [String: String] = [:]
    for line in lines {
        switch line.withUnsafeBytes({ Download.parseHeaderLine($0) }) {
        case .statusLine: headers = [:]
        case .kept(let name, let value):
            headers[name] = value
            checkValueParsers(value)
        case .ignored: break
        }
    }
    // The engine only asks for ranges within the file; the check must hold for any server answer.
    guard offset >= 0, expectedSize >= 0, offset <= expectedSize else { return }
    let head = ResponseHead(status: status, headers: headers)
    // A conditional request (a refused file's validator) only from offset 0, as the engine sends it.
    let conditional = offset == 0 && status % 2 == 0
    switch ResponseCheck.verdict(for: head, requestedOffset: offset, expectedSize: expectedSize, conditional: conditional) {
    case .accept(let start):
        if start == 0 {
            if status != 200 { fatalError("accepted a \(status) response from offset 0") }
        } else {
            guard status == 206, start == offset, let text = headers["content-range"], let range = ContentRange(text),
                  range.first == offset, range.last == expectedSize - 1, range.completeLength == expectedSize else {
                fatalError("accepted a partial response that does not continue the file: \(headers)")
            }
        }
    case .rangeNotSatisfiable(let length):
        if status != 416 { fatalError("416 verdict for status \(status)") }
        if let length, length < 0 { fatalError("negative complete length \(length)") }
    case .notModified:
        if status != 304 || !conditional { fatalError("not-modified verdict for status \(status), conditional \(conditional)") }
    case .reject:
        break
    }
    _ = head.resumeValidator
}

/// Every value parser on every kept value, whatever its header: they must not trap.
private func checkValueParsers(_ value: String) {
    if let range = ContentRange(value) {
        if let first = range.first, let last = range.last {
            if first < 0 || first > last { fatalError("Content-Range bounds out of order: \(value)") }
            if let total = range.completeLength, last >= total { fatalError("Content-Range past its length: \(value)") }
        }
    }
    if let length = ResponseCheck.parseLength(value), length < 0 { fatalError("negative length from \(value)") }
    if let seconds = RetryAfter.seconds(from: value, now: 1_700_000_000), !(seconds >= 0) {
        fatalError("Retry-After gave \(seconds) for \(value)")
    }
}
