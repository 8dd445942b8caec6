//! Not written yet: the next commit reads this format.
use super::plan::Plan;
use super::{Input, Options as All, Problem};

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub tags: Vec<String>,
    pub operations: Vec<String>,
}

pub fn import(_input: &Input, _options: &All) -> Result<Plan, Problem> {
    Err(Problem::usage("this format is not supported yet"))
}
