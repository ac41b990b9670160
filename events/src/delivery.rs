//! Delivery routing: which owner channels are given which owner messages (`[owner.deliver]`).
//!
//! The owner routes by three classes, the ones a person tells apart: **answers** (what the
//! assistant said about a job, a watch, a webhook, mail), **notices** (`notify_owner`, and
//! what the daemon says about itself: the model is unavailable, a step failed) and
//! **confirmations** (a request to confirm, and what became of it — the outcome goes where
//! the request went, so a request is never left without its end).
//!
//! A channel the owner did not name gets every class; a named one gets exactly the classes
//! listed (an empty list: nothing). Routing decides what a channel *pushes*: an answer to
//! the owner's own request is always shown by the session that asked, whatever the rules.

use std::collections::{BTreeMap, BTreeSet};

/// The classes the owner routes by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeliveryClass {
    Answers,
    Notices,
    Confirmations,
}

impl DeliveryClass {
    pub const ALL: [Self; 3] = [Self::Answers, Self::Notices, Self::Confirmations];

    /// The name in `[owner.deliver]`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answers => "answers",
            Self::Notices => "notices",
            Self::Confirmations => "confirmations",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
    }
}

/// `[owner.deliver]`: channel → the classes it is given, for the channels the owner named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryRules {
    named: BTreeMap<String, BTreeSet<DeliveryClass>>,
}

impl DeliveryRules {
    /// Rules naming these channels; any other channel gets every class.
    pub fn new(named: BTreeMap<String, BTreeSet<DeliveryClass>>) -> Self {
        Self { named }
    }

    /// Whether `channel` is given messages of `class`.
    pub fn delivers(&self, channel: &str, class: DeliveryClass) -> bool {
        self.named
            .get(channel)
            .is_none_or(|classes| classes.contains(&class))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryClass::*;

    #[test]
    fn unnamed_channels_get_everything_named_ones_what_they_list() {
        let rules = DeliveryRules::new(BTreeMap::from([
            ("email".to_owned(), BTreeSet::from([Notices, Confirmations])),
            ("http".to_owned(), BTreeSet::new()),
        ]));
        let table = [
            ("email", Answers, false),
            ("email", Notices, true),
            ("email", Confirmations, true),
            ("http", Answers, false),
            ("http", Notices, false),
            ("http", Confirmations, false),
            ("socket", Answers, true),
            ("socket", Notices, true),
            ("socket", Confirmations, true),
        ];
        for (channel, class, expected) in table {
            assert_eq!(
                rules.delivers(channel, class),
                expected,
                "{channel} {class:?}"
            );
        }
        let none = DeliveryRules::default();
        assert!(
            DeliveryClass::ALL
                .iter()
                .all(|c| none.delivers("email", *c))
        );
    }

    #[test]
    fn class_names_round_trip() {
        for class in DeliveryClass::ALL {
            assert_eq!(DeliveryClass::parse(class.as_str()), Some(class));
        }
        assert_eq!(DeliveryClass::parse("answer"), None);
    }
}
