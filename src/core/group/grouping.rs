//! Forming a group: which queued calls leave together as one `batch` invocation.
//!
//! A group is bounded by the jobs its calls work on, not by how many calls it holds
//! (a call's weight, [`Member::weight`]): counted in calls, a group of a hundred batch
//! completions that each lease ten ran for about fifty milliseconds, and held every
//! other client of Redis that long (and the gateway's answers, so that Redis and the
//! gateway took turns rather than worked side by side); counted in jobs, no group
//! takes much longer than a hundred single-job calls, a few milliseconds.

/// A queued call, as grouping sees it.
pub(super) trait Member {
    /// The jobs it works on (at least 1).
    fn weight(&self) -> usize;
    /// Whether it must go by itself (a `batch` cannot be nested in a group's batch).
    fn alone(&self) -> bool;
    /// Whether its caller has gone, so that sending it would serve no one.
    fn gone(&self) -> bool;
}

/// What leaves next: one call by itself (no allocation), or a group.
#[derive(Debug, PartialEq)]
pub(super) enum Formed<T> {
    One(T),
    Group(Vec<T>),
}

/// Forms what leaves next from the calls `next` hands out in order (the held call
/// first, then the queue): the first call whose caller is still there, joined by
/// those after it while their weights stay within `bound` jobs. Calls whose callers
/// have gone are dropped on the way. Returns what leaves (none when every call was
/// abandoned) and the call that could not join, which leads the next group: one that
/// must go alone, or one that would take the group past its bound. A call heavier
/// than the bound by itself still leaves, alone.
pub(super) fn form<T: Member>(
    bound: usize,
    mut next: impl FnMut() -> Option<T>,
) -> (Option<Formed<T>>, Option<T>) {
    let first = loop {
        match next() {
            Some(call) if call.gone() => continue,
            Some(call) => break call,
            None => return (None, None),
        }
    };
    if first.alone() {
        return (Some(Formed::One(first)), None);
    }
    let mut work = first.weight();
    let mut group: Option<Vec<T>> = None;
    let mut first = Some(first);
    let mut held = None;
    while work < bound {
        let Some(call) = next() else { break };
        if call.gone() {
            continue;
        }
        let more = call.weight();
        if call.alone() || work.saturating_add(more) > bound {
            held = Some(call);
            break;
        }
        work += more;
        group
            .get_or_insert_with(|| Vec::from_iter(first.take()))
            .push(call);
    }
    let formed = match (group, first) {
        (Some(group), _) => Formed::Group(group),
        (None, Some(first)) => Formed::One(first),
        (None, None) => unreachable!("the first call is in the group or alone"),
    };
    (Some(formed), held)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call of `weight` jobs named `name`; `!` makes it go alone, `~` abandoned.
    #[derive(Debug, PartialEq)]
    struct Call(&'static str, usize);

    impl Member for Call {
        fn weight(&self) -> usize {
            self.1
        }
        fn alone(&self) -> bool {
            self.0.starts_with('!')
        }
        fn gone(&self) -> bool {
            self.0.starts_with('~')
        }
    }

    /// What [`form`] makes of `queue` with `bound`: the names that leave, the one held,
    /// and how many calls it took from the queue.
    fn formed(
        bound: usize,
        queue: &[(&'static str, usize)],
    ) -> (Vec<&'static str>, Option<&'static str>, usize) {
        let mut queue = queue.iter().map(|&(name, weight)| Call(name, weight));
        let mut taken = 0;
        let (formed, held) = form(bound, || {
            let call = queue.next();
            taken += usize::from(call.is_some());
            call
        });
        let names = match formed {
            None => Vec::new(),
            Some(Formed::One(call)) => vec![call.0],
            Some(Formed::Group(calls)) => {
                assert!(calls.len() > 1, "a group of one is a call alone");
                calls.into_iter().map(|call| call.0).collect()
            }
        };
        (names, held.map(|call| call.0), taken)
    }

    #[test]
    fn groups_are_formed_by_weight_within_the_bound() {
        type Case = (
            usize,
            &'static [(&'static str, usize)],
            &'static [&'static str],
            Option<&'static str>,
            usize,
        );
        let cases: &[Case] = &[
            // bound, queue, what leaves, held, calls taken from the queue
            (100, &[], &[], None, 0),
            (100, &[("a", 1)], &["a"], None, 1),
            (
                100,
                &[("a", 1), ("b", 1), ("c", 1)],
                &["a", "b", "c"],
                None,
                3,
            ),
            // Up to the bound exactly, and no further look at the queue.
            (
                3,
                &[("a", 1), ("b", 1), ("c", 1), ("d", 1)],
                &["a", "b", "c"],
                None,
                3,
            ),
            // A pop of ten would take the group past the bound: it leads the next one.
            (
                10,
                &[("a", 1), ("pop", 10), ("c", 1)],
                &["a"],
                Some("pop"),
                2,
            ),
            (10, &[("pop", 10), ("a", 1)], &["pop"], None, 1),
            (10, &[("pop", 25), ("a", 1)], &["pop"], None, 1),
            (
                20,
                &[("a", 5), ("b", 5), ("c", 5), ("d", 5), ("e", 1)],
                &["a", "b", "c", "d"],
                None,
                4,
            ),
            // A batch goes alone, and ends the group before it.
            (100, &[("!batch", 3), ("a", 1)], &["!batch"], None, 1),
            (
                100,
                &[("a", 1), ("b", 1), ("!batch", 3), ("c", 1)],
                &["a", "b"],
                Some("!batch"),
                3,
            ),
            // Bound 1: every call alone, the next one held.
            (1, &[("a", 1), ("b", 1)], &["a"], None, 1),
            // Abandoned calls are dropped, and take no room in the group.
            (
                2,
                &[("~a", 1), ("b", 1), ("~c", 1), ("d", 1), ("e", 1)],
                &["b", "d"],
                None,
                4,
            ),
            (100, &[("~a", 1), ("~b", 1)], &[], None, 2),
            (100, &[("~a", 1), ("b", 1)], &["b"], None, 2),
        ];
        for &(bound, queue, leaves, held, taken) in cases {
            assert_eq!(
                formed(bound, queue),
                (leaves.to_vec(), held, taken),
                "bound {bound}, queue {queue:?}"
            );
        }
    }
}
