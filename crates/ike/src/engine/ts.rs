//! Traffic selector narrowing (RFC 7296 section 2.9): the responder
//! answers with the intersection of what the initiator proposed and what
//! its own policy allows; the initiator accepts only a subset of what it
//! proposed.

use crate::message::TrafficSelector;

fn proto(a: u8, b: u8) -> Option<u8> {
    match (a, b) {
        (0, x) | (x, 0) => Some(x),
        (x, y) if x == y => Some(x),
        _ => None,
    }
}

/// The intersection of two selectors; None when empty or of different
/// families (or an opaque type).
pub fn intersect(a: &TrafficSelector, b: &TrafficSelector) -> Option<TrafficSelector> {
    use TrafficSelector::*;
    match (a, b) {
        (
            Ipv4 {
                ip_protocol: pa,
                start_port: spa,
                end_port: epa,
                start: sa,
                end: ea,
            },
            Ipv4 {
                ip_protocol: pb,
                start_port: spb,
                end_port: epb,
                start: sb,
                end: eb,
            },
        ) => {
            let (start, end) = ((*sa).max(*sb), (*ea).min(*eb));
            let (start_port, end_port) = ((*spa).max(*spb), (*epa).min(*epb));
            (start <= end && start_port <= end_port).then_some(())?;
            Some(Ipv4 {
                ip_protocol: proto(*pa, *pb)?,
                start_port,
                end_port,
                start,
                end,
            })
        }
        (
            Ipv6 {
                ip_protocol: pa,
                start_port: spa,
                end_port: epa,
                start: sa,
                end: ea,
            },
            Ipv6 {
                ip_protocol: pb,
                start_port: spb,
                end_port: epb,
                start: sb,
                end: eb,
            },
        ) => {
            let (start, end) = ((*sa).max(*sb), (*ea).min(*eb));
            let (start_port, end_port) = ((*spa).max(*spb), (*epa).min(*epb));
            (start <= end && start_port <= end_port).then_some(())?;
            Some(Ipv6 {
                ip_protocol: proto(*pa, *pb)?,
                start_port,
                end_port,
                start,
                end,
            })
        }
        _ => None,
    }
}

/// The responder's answer: every non-empty intersection of a proposed
/// selector with one of `policy`, without duplicates.
pub fn narrow(proposed: &[TrafficSelector], policy: &[TrafficSelector]) -> Vec<TrafficSelector> {
    let mut out = Vec::new();
    for p in proposed {
        for q in policy {
            if let Some(ts) = intersect(p, q) {
                if !out.contains(&ts) {
                    out.push(ts);
                }
            }
        }
    }
    out
}

/// True when every selector of `answer` lies inside one of `proposed`
/// (what an initiator checks in the responder's TSi/TSr).
pub fn is_subset(answer: &[TrafficSelector], proposed: &[TrafficSelector]) -> bool {
    !answer.is_empty()
        && answer
            .iter()
            .all(|a| proposed.iter().any(|p| intersect(a, p).as_ref() == Some(a)))
}
