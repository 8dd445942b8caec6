//! Names discovered while a run goes: the names requests are kept under and
//! those of checks. Each has one index for the whole run, so that every
//! worker's per-name statistics merge by index as a plan's steps do; the
//! registry is locked only when a worker meets a name for the first time
//! (each worker keeps the indices it has seen).

use std::collections::HashMap;
use std::sync::Mutex;

/// Past this many names, new ones are folded into one: a URL with an id in
/// it, named by default, must not make a set of statistics per id.
pub const MAX_NAMES: usize = 1_000;

/// The name the folded ones share.
pub const FOLDED: &str = "(other names)";

/// One run's names of one kind, in the order they were first met.
#[derive(Debug, Default)]
pub struct Names {
    kind: &'static str,
    list: Mutex<Vec<String>>,
}

impl Names {
    /// An empty registry; `kind` names its names in the warning given when
    /// they are folded ("request names").
    pub fn new(kind: &'static str) -> Names {
        Names {
            kind,
            list: Mutex::default(),
        }
    }

    /// The index of `name`, given it if it is new; past [`MAX_NAMES`] the
    /// index of [`FOLDED`], with a warning the first time.
    pub fn index(&self, name: &str) -> usize {
        let mut list = self.list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(found) = list.iter().position(|known| known == name) {
            return found;
        }
        if list.len() < MAX_NAMES {
            list.push(name.to_string());
            return list.len() - 1;
        }
        if list.len() == MAX_NAMES {
            eprintln!(
                "warning: over {MAX_NAMES} {}: the rest are counted together as '{FOLDED}' \
                 (give requests a `name` in their params rather than naming them by URL)",
                self.kind
            );
            list.push(FOLDED.to_string());
        }
        MAX_NAMES
    }

    /// Every name so far, by index.
    pub fn list(&self) -> Vec<String> {
        self.list
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// One worker's view of a registry: the indices it has met, looked up
/// without the lock.
#[derive(Debug, Default)]
pub struct SeenNames {
    seen: HashMap<String, usize>,
}

impl SeenNames {
    /// The index of `name` in `names`.
    pub fn index(&mut self, names: &Names, name: &str) -> usize {
        if let Some(&index) = self.seen.get(name) {
            return index;
        }
        let index = names.index(name);
        // The folded names are not kept: past the limit a run may meet
        // any number of them.
        if index < MAX_NAMES {
            self.seen.insert(name.to_string(), index);
        }
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_one_index_each_and_fold_past_the_limit() {
        let names = Names::new("request names");
        let mut first = SeenNames::default();
        let mut second = SeenNames::default();
        assert_eq!(first.index(&names, "list"), 0);
        assert_eq!(second.index(&names, "cart"), 1);
        assert_eq!(second.index(&names, "list"), 0);
        assert_eq!(first.index(&names, "cart"), 1);
        for i in 2..MAX_NAMES {
            assert_eq!(first.index(&names, &format!("/item/{i}")), i);
        }
        assert_eq!(first.index(&names, "/item/new"), MAX_NAMES);
        assert_eq!(second.index(&names, "/item/newer"), MAX_NAMES);
        let list = names.list();
        assert_eq!(list.len(), MAX_NAMES + 1);
        assert_eq!(list[MAX_NAMES], FOLDED);
        assert_eq!(first.index(&names, "list"), 0);
    }
}
