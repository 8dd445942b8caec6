//! Not written yet: the next commit reads this format.
use super::plan::Plan;
use super::{Input, Options, Problem};

pub fn import(_input: &Input, _options: &Options) -> Result<Plan, Problem> {
    Err(Problem::usage("this format is not supported yet"))
}
