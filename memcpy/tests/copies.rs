//! c/memcpy.c against an independent expectation, run where it is linked in: `make unit` runs
//! this test for the static musl target. Every length to past the `rep movsb` threshold at every
//! pair of alignments, and the forward overlapping copies musl's `memmove` hands to it.

#![allow(clippy::unwrap_used)] // test code

use std::hint::black_box;

use kube_retention_memcpy as _;

const LONGEST: usize = 1100;

fn pattern(index: usize) -> u8 {
    (index.wrapping_mul(131) % 251) as u8
}

fn static_musl() -> bool {
    cfg!(all(target_env = "musl", target_arch = "x86_64"))
}

#[test]
fn this_test_copies_with_it_on_the_static_target() {
    let binary = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert_eq!(
        kube_retention_memcpy::linked_in(&binary).unwrap(),
        static_musl(),
        "memcpy should be {} on this target",
        kube_retention_memcpy::SYMBOL
    );
}

#[test]
fn every_length_at_every_alignment_copies_exactly_its_bytes() {
    let source: Vec<u8> = (0..LONGEST + 16).map(pattern).collect();
    for length in 0..=LONGEST {
        for from in 0..16 {
            for to in 0..16 {
                let mut destination = vec![0xEE_u8; LONGEST + 48];
                let length = black_box(length);
                destination[16 + to..16 + to + length]
                    .copy_from_slice(&source[from..from + length]);
                for (index, byte) in destination.iter().enumerate() {
                    let expected = match index.checked_sub(16 + to) {
                        Some(offset) if offset < length => pattern(from + offset),
                        _ => 0xEE,
                    };
                    assert_eq!(
                        *byte, expected,
                        "length {length}, from {from}, to {to}, byte {index}"
                    );
                }
            }
        }
    }
}

#[test]
fn forward_overlapping_moves_keep_the_source_as_it_was() {
    for length in 0..=LONGEST {
        for shift in [1, 7, 8, 15, 16, 31, 32, 33, 255, 600] {
            let mut buffer: Vec<u8> = (0..LONGEST + 600).map(pattern).collect();
            let length = black_box(length);
            buffer.copy_within(shift..shift + length, 0);
            for (index, byte) in buffer.iter().enumerate() {
                let expected = if index < length {
                    pattern(shift + index)
                } else {
                    pattern(index)
                };
                assert_eq!(
                    *byte, expected,
                    "length {length}, shift {shift}, byte {index}"
                );
            }
        }
    }
}
