//! The demo corpus: a few short passages on one topic (the Golden Gate Bridge), with claims
//! to try.

use verity_core::corpus::Passage;

/// The demo's passages.
pub const DEMO_PASSAGES: &[(&str, &str)] = &[
    (
        "demo#1",
        "The Golden Gate Bridge is a suspension bridge spanning the Golden Gate, the strait connecting San Francisco Bay and the Pacific Ocean.",
    ),
    (
        "demo#2",
        "Construction of the Golden Gate Bridge began on January 5, 1933, and the bridge opened to pedestrians on May 27, 1937.",
    ),
    (
        "demo#3",
        "The bridge opened to vehicle traffic on May 28, 1937, the day after the pedestrian opening.",
    ),
    (
        "demo#4",
        "The chief engineer of the Golden Gate Bridge was Joseph Strauss; Charles Alton Ellis did much of the structural design.",
    ),
    (
        "demo#5",
        "The main span of the Golden Gate Bridge is 4,200 feet (1,280 meters) long, the longest suspension span in the world until 1964.",
    ),
    (
        "demo#6",
        "The bridge is painted in a color called International Orange, chosen to stand out in the fog and to suit its natural setting.",
    ),
    ("demo#7", "The towers of the Golden Gate Bridge rise 746 feet (227 meters) above the water."),
    (
        "demo#8",
        "The Golden Gate Bridge carries U.S. Route 101 and California State Route 1 across the strait.",
    ),
];

/// Claims to try on the demo corpus: one supported, one contradicted, one without evidence.
pub const DEMO_CLAIMS: &[&str] = &[
    "The Golden Gate Bridge opened to pedestrians in 1937.",
    "The main span of the Golden Gate Bridge is 3,000 feet long.",
    "The Golden Gate Bridge was designed to carry trains.",
];

/// The demo's passages, owned.
#[must_use]
pub fn demo_passages() -> Vec<Passage> {
    DEMO_PASSAGES
        .iter()
        .map(|(id, text)| Passage { id: (*id).to_owned(), text: (*text).to_owned() })
        .collect()
}
