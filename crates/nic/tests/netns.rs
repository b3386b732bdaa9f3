//! Entering a namespace on the calling thread and coming back.

mod common;

use std::os::unix::fs::MetadataExt;

use common::{can_run, Net};

/// The inode of the calling thread's network namespace.
fn current() -> u64 {
    std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino()
}

#[test]
fn enter_moves_this_thread_and_the_guard_brings_it_back() {
    if !can_run("enter_moves_this_thread_and_the_guard_brings_it_back") {
        return;
    }
    let net = Net::new();
    let there = std::fs::metadata(format!("/var/run/netns/{}", net.a))
        .unwrap()
        .ino();
    let home = current();
    assert_ne!(home, there);
    {
        let _g = nic::netns::enter(&net.a).unwrap();
        assert_eq!(current(), there);
    }
    assert_eq!(current(), home);
    assert!(nic::netns::enter("fusebox-no-such-namespace").is_err());
    assert_eq!(current(), home);
}
