//! When each open connection falls idle: a queue of deadlines, earliest first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A deadline: capture time in ns, slot, connection id.
pub(crate) type Deadline = (i64, u32, u64);

/// Deadlines, earliest first. Most come in order (a new connection's is its
/// first segment's time plus a timeout): those wait in a FIFO, in O(1); the
/// rest (a deadline put back later, a capture whose time went backwards) in
/// a heap.
#[derive(Default)]
pub(crate) struct Deadlines {
    fifo: VecDeque<Deadline>,
    heap: BinaryHeap<Reverse<Deadline>>,
}

impl Deadlines {
    pub(crate) fn push(&mut self, d: Deadline) {
        if self.fifo.back().is_none_or(|b| b.0 <= d.0) {
            self.fifo.push_back(d);
        } else {
            self.heap.push(Reverse(d));
        }
    }

    /// Puts back a deadline taken out: it may be earlier than ones queued after it.
    pub(crate) fn push_back_later(&mut self, d: Deadline) {
        self.heap.push(Reverse(d));
    }

    /// The earliest deadline's time.
    #[inline]
    pub(crate) fn first_due(&self) -> Option<i64> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => Some(f.0.min(h.0 .0)),
            (Some(f), None) => Some(f.0),
            (None, Some(h)) => Some(h.0 .0),
            (None, None) => None,
        }
    }

    /// Takes the earliest deadline.
    pub(crate) fn pop(&mut self) -> Option<Deadline> {
        let from_fifo = match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => *f <= h.0,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_fifo {
            self.fifo.pop_front()
        } else {
            self.heap.pop().map(|Reverse(d)| d)
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    /// Keeps the deadlines `keep` says to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Deadline) -> bool) {
        self.fifo.retain(&mut keep);
        self.heap.retain(|Reverse(d)| keep(d));
    }

    /// Bytes allocated.
    pub(crate) fn bytes(&self) -> usize {
        (self.fifo.capacity() + self.heap.capacity()) * std::mem::size_of::<Deadline>()
    }
}
