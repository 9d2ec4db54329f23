/// A first-in, first-out queue on one array: taking the first moves a head instead of every
/// element after it (`Array.removeFirst`, which made taking 10^6 entries one by one quadratic:
/// seconds at 10^5, minutes at 10^6; docs/performance.md, "A first sync of many files"). The
/// taken part is dropped once it is half the array, so memory stays within twice what is queued.
/// The scheduler's queue (`Scheduler`) and the plan's entries (`PlannedEntries`) are two.
package struct HeadQueue<Element> {
    private var items: [Element] = []
    private var head = 0

    package init() {}

    /// What is still queued, in order.
    package var remaining: ArraySlice<Element> { items[head...] }
    package var count: Int { items.count - head }
    package var isEmpty: Bool { head == items.count }

    package mutating func append(_ element: Element) { items.append(element) }

    package mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let first = items[head]
        head += 1
        if head >= 1024 && head * 2 >= items.count { dropTaken() }
        return first
    }

    /// Removes the queued elements `shouldRemove` picks; the others keep their order.
    package mutating func removeAll(where shouldRemove: (Element) -> Bool) {
        dropTaken()
        items.removeAll(where: shouldRemove)
    }

    private mutating func dropTaken() {
        items.removeFirst(head)
        head = 0
    }
}
