//! The bytes of requests in flight, one budget for every client of every
//! front-end (`server.max_inflight_bytes`, 256 MiB by default): a message
//! takes its share when its bytes arrive and gives it back once its answer
//! is sent. A client whose message does not fit waits (its connection is
//! not read meanwhile, so TCP slows it down); nothing is read past the
//! budget.

use std::sync::Arc;

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

#[derive(Debug, Clone)]
pub struct Budget {
    bytes: Arc<Semaphore>,
    total: usize,
}

impl Budget {
    pub fn new(total: usize) -> Self {
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Self { bytes: Arc::new(Semaphore::new(total)), total }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// The share of a message of `len` bytes, at once, or `None` while the
    /// budget is spent.
    pub fn try_take(&self, len: usize) -> Option<Share> {
        self.bytes.clone().try_acquire_many_owned(self.cost(len)).ok().map(Share)
    }

    /// The share of a message of `len` bytes, once there is room.
    pub async fn take(&self, len: usize) -> Result<Share, AcquireError> {
        self.bytes.clone().acquire_many_owned(self.cost(len)).await.map(Share)
    }

    /// What a message of `len` bytes takes: twice its length, since the text
    /// and its decoded form (serde_json's copy of every string) both live
    /// until the answer is sent; never more than the whole budget (or it
    /// could never run).
    pub fn cost(&self, len: usize) -> u32 {
        cost(len, self.total)
    }

    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }
}

fn cost(len: usize, total: usize) -> u32 {
    len.saturating_mul(2).clamp(1, total.min(u32::MAX as usize)) as u32
}

/// A message's share of the budget, given back on drop.
#[derive(Debug)]
pub struct Share(OwnedSemaphorePermit);

impl Share {
    /// Gives back what is over the cost of a message of `len` bytes (a body
    /// whose size was not known when its share was taken).
    pub fn shrink_to(&mut self, budget: &Budget, len: usize) {
        let keep = budget.cost(len) as usize;
        let excess = self.0.num_permits().saturating_sub(keep);
        if excess > 0 {
            drop(self.0.split(excess));
        }
    }
}

/// What a request holds while it runs: its place among its connection's
/// requests in flight and its share of the byte budget. A request that
/// goes on to wait for the user (a review) gives both back with
/// [`Held::release`]: its bytes now belong to the review, which has limits
/// of its own, and its connection must keep reading (pings, other requests).
#[derive(Debug, Default)]
pub struct Held {
    pub slot: Option<OwnedSemaphorePermit>,
    pub share: Option<Share>,
}

impl Held {
    pub fn release(&mut self) {
        self.slot = None;
        self.share = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_costs_twice_its_length_within_the_budget() {
        assert_eq!(cost(0, 1 << 20), 1);
        assert_eq!(cost(1000, 1 << 20), 2000);
        assert_eq!(cost(1 << 30, 1 << 20), 1 << 20);
        assert_eq!(cost(usize::MAX, usize::MAX), u32::MAX);
    }

    #[tokio::test]
    async fn shares_come_back_on_drop_and_release() {
        let budget = Budget::new(100);
        let a = budget.try_take(30).expect("room for 60");
        assert!(budget.try_take(30).is_none(), "60 + 60 > 100");
        drop(a);
        let slots = Arc::new(Semaphore::new(1));
        let mut held = Held { slot: slots.clone().try_acquire_owned().ok(), share: budget.try_take(50) };
        assert_eq!((budget.available(), slots.available_permits()), (0, 0));
        held.release();
        assert_eq!((budget.available(), slots.available_permits()), (100, 1));
        let mut over = budget.try_take(40).expect("room for 80");
        over.shrink_to(&budget, 10);
        assert_eq!(budget.available(), 80, "kept the cost of 10 bytes");
        drop(over);
        // Bigger than the whole budget: takes all of it, once it is free.
        let all = budget.take(1 << 20).await.unwrap();
        assert_eq!(budget.available(), 0);
        drop(all);
    }
}
