//! The executor's own drop reasons (drops no element decided), shared by the naive
//! executor, synthesized programs and synthesis's walk so each text is written once.

elements::reasons! {
    /// Why the executor itself drops a packet.
    pub enum ChainReason {
        /// The element sent it out of an output port with nothing connected.
        UnconnectedOutput => "unconnected-output",
        /// It crossed [`crate::exec::MAX_HOPS`] links between NFs (a forwarding loop).
        Loop => "loop",
        /// A synthesized program reached a branch synthesis did not produce (never expected:
        /// counted, not hidden).
        SynthesisMissedBranch => "synthesis-missed-branch",
    }
}
