//! A campaign over machine levels (`matrix.machine`): host runs through
//! this machine's [`MachineExecutor`] (with its cooldown between two host
//! runs), guest runs through the [`GuestExecutor`], which boots each
//! level's guest once for that level's runs.

use anyhow::Result;

use crate::launch::Outcome;
use crate::machine::GuestExecutor;
use crate::plan::Run;

use super::MachineExecutor;
use super::execute::Executor;

pub struct Levels {
    pub host: MachineExecutor,
    pub guests: GuestExecutor,
    /// Whether a host run came before (its cooldown comes before the next).
    host_ran: bool,
}

impl Levels {
    pub fn new(host: MachineExecutor, guests: GuestExecutor) -> Levels {
        Levels {
            host,
            guests,
            host_ran: false,
        }
    }

    /// Power the guest off and put back what the host's runs changed.
    pub fn finish(mut self) -> Result<()> {
        self.guests.power_off();
        self.host.finish()
    }
}

impl Executor for Levels {
    fn execute(&mut self, run: &Run) -> Result<Outcome> {
        if run.machine.as_ref().is_some_and(|m| m.guest.is_some()) {
            return self.guests.execute(run);
        }
        // The guest of the level before is off before a host run measures.
        self.guests.power_off();
        if self.host_ran
            && let Some(sig) = self.host.between_runs()
        {
            return Ok(Outcome::Interrupted(sig));
        }
        self.host_ran = true;
        self.host.execute(run)
    }
}
