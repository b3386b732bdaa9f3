//! The element registry: every class builds from its documented example, under its own
//! name, once; its documentation lists the drop reasons its model gives.

use elements::model::Outcome;
use elements::registry::{class, CLASSES};
use std::collections::HashSet;

#[test]
fn every_class_builds_from_its_example_under_its_name() {
    let mut seen = HashSet::new();
    for c in CLASSES {
        assert!(seen.insert(c.name), "{}: listed twice", c.name);
        let e = c
            .example()
            .unwrap_or_else(|err| panic!("{}({}): {err}", c.name, c.doc.example));
        assert_eq!(e.class_name(), c.name);
        assert!(!c.doc.about.is_empty(), "{}: no description", c.name);
        assert!(class(c.name).is_some());
    }
    assert!(class("NoSuchElement").is_none());
}

#[test]
fn documented_drop_reasons_cover_the_models() {
    for c in CLASSES {
        let Ok(e) = c.example() else { continue };
        let Some(m) = e.model() else { continue };
        for case in &m.cases {
            if let Outcome::Drop(reason) = case.outcome {
                assert!(
                    c.doc.drops.contains(&reason),
                    "{}: its model drops under `{reason}`, which its Doc does not list",
                    c.name
                );
            }
        }
    }
}

#[test]
fn descriptions_say_what_was_derived() {
    for c in CLASSES {
        let d = c.describe();
        assert!(d.starts_with(c.name), "{d}");
        for k in ["ports", "drops", "model", "fast path"] {
            assert!(d.contains(k), "{}: no `{k}` in\n{d}", c.name);
        }
    }
    let strip = class("Strip").map(|c| c.describe()).unwrap_or_default();
    assert!(
        strip.contains("1/1") && strip.contains("model      yes"),
        "{strip}"
    );
}
