//! An operator pipeline as a FuseBox element: usable by name in Click configurations and
//! chain files, in every mode, counted and accounted for like any element.
//!
//! The pipeline receives each packet as a [`Pkt<Raw>`](crate::Pkt) and what it hands on at
//! its end leaves by output 0; [`Cx::send`](crate::Cx::send) (the `send` operator) uses
//! other outputs; drops are counted under the operator's reason. Synthesis runs the NF as
//! an opaque element unless it declares a model ([`OperatorNf::with_model`]); the fast path
//! records it as opaque (its flows take the full chain) unless it declares a model, which
//! the executor then records for it.

use crate::header::{Raw, Stack};
use crate::pipe::{Cx, Stage};
use crate::pkt::Pkt;
use elements::record::Declared;
use elements::registry::{Doc, ElementClass};
use elements::{Batching, Context, Element, Model, PortCount, Verdict};
use packet::Packet;

/// The metadata a packet starts an operator NF's pipeline with: `()` for NFs with one
/// input, [`Input`] for NFs whose pipeline must know which input a packet came in on
/// (a NAT's inside and outside).
pub trait Start: Send + 'static {
    /// The metadata of a packet arriving on input `port`.
    fn start(port: usize) -> Self;
    /// How many inputs an NF starting its packets with this metadata has, at most.
    const MAX_INPUTS: usize;
}

impl Start for () {
    #[inline(always)]
    fn start(_: usize) {}
    const MAX_INPUTS: usize = 1;
}

/// The input port a packet arrived on (metadata of NFs with several inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Input(pub usize);

impl Start for Input {
    #[inline(always)]
    fn start(port: usize) -> Input {
        Input(port)
    }
    const MAX_INPUTS: usize = usize::MAX;
}

/// A built operator pipeline `P` as an element of class `class`; `I` is the metadata its
/// packets start with ([`Start`]).
pub struct OperatorNf<P, I = ()> {
    class: &'static str,
    inputs: usize,
    stage: P,
    outputs: usize,
    model: Option<fn() -> Model>,
    declared: Option<Declared>,
    batching: Batching,
    cx: Cx,
    _start: std::marker::PhantomData<fn() -> I>,
}

impl<P, I> std::fmt::Debug for OperatorNf<P, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorNf")
            .field("class", &self.class)
            .field("outputs", &self.outputs)
            .finish()
    }
}

/// What can leave an operator NF at the end of its pipeline.
pub trait Leave {
    /// The FuseBox packet.
    fn into_packet(self) -> Packet;
}

impl<S: Stack, M> Leave for Pkt<S, M> {
    #[inline]
    fn into_packet(self) -> Packet {
        Pkt::into_packet(self)
    }
}

impl<P, I: Start> OperatorNf<P, I>
where
    P: Stage<Pkt<Raw, I>> + 'static,
    P::Out: Leave,
{
    /// The pipeline `stage` as an element of class `class` with `outputs` outputs (at least
    /// one: what the pipeline hands on at its end leaves by output 0) and one input.
    pub fn new(class: &'static str, outputs: usize, stage: P) -> OperatorNf<P, I> {
        OperatorNf {
            class,
            inputs: 1,
            stage,
            outputs: outputs.max(1),
            model: None,
            declared: None,
            batching: Batching::Never,
            cx: Cx::default(),
            _start: std::marker::PhantomData,
        }
    }

    /// The NF has `n` inputs (at most what `I` tells apart: one for `()`); the pipeline
    /// reads a packet's input from its [`Input`] metadata.
    pub fn inputs(mut self, n: usize) -> Self {
        self.inputs = n.clamp(1, I::MAX_INPUTS);
        self
    }

    /// Declares the NF's semantic model (see `elements::model`): synthesis then folds it
    /// into traffic classes and the fast path records it, instead of treating the NF as
    /// opaque. The model must describe exactly what the pipeline does; the differential
    /// harness checks it.
    pub fn with_model(mut self, model: fn() -> Model) -> Self {
        self.model = Some(model);
        self
    }

    /// Declares what the NF may do to any packet, for the planner (see
    /// `elements::record::Declared`: one packet in, one out or a drop, its length kept, only
    /// the declared fields written); the property test of declarations checks it against
    /// what the pipeline does.
    pub fn with_declared(mut self, declared: Declared) -> Self {
        self.declared = Some(declared);
        self
    }

    /// Declares that the NF keeps no state, so the executor may run it over batches
    /// ([`Batching::Free`]).
    pub fn stateless(mut self) -> Self {
        self.batching = Batching::Free;
        self
    }

    /// The pipeline's counters (every stage's).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        self.stage.stats(&mut out);
        out
    }
}

impl<P, I: Start> Element for OperatorNf<P, I>
where
    P: Stage<Pkt<Raw, I>> + 'static,
    P::Out: Leave,
{
    fn class_name(&self) -> &'static str {
        self.class
    }

    fn port_count(&self) -> PortCount {
        PortCount::range(1, self.inputs, 1, self.outputs)
    }

    #[inline]
    fn push(&mut self, port: usize, packet: Packet, cx: &mut Context) -> Verdict {
        if self.model.is_none() {
            cx.record_opaque("operator NF without a model");
        }
        let c = &mut self.cx;
        c.set_origin(&packet.meta);
        if c.now != cx.now {
            c.now = cx.now;
            self.stage.tick(c);
        }
        let rest = self
            .stage
            .run(Pkt::new(packet).with_meta(I::start(port)), c);
        let created = c.take_created();
        if created > 0 {
            cx.count_created(created);
        }
        match (rest, c.pending()) {
            (Some(p), (0, 0)) => Verdict::Out(0, p.into_packet()),
            (None, (1, 0)) => match c.take_sent().next() {
                Some((port, p)) => Verdict::Out(port, p),
                None => Verdict::Done,
            },
            (None, (0, 1)) => match c.take_dropped().next() {
                Some((p, reason)) => Verdict::Drop(p, reason),
                None => Verdict::Done,
            },
            (rest, _) => {
                for (p, reason) in c.take_dropped() {
                    cx.drop(p, reason);
                }
                for (port, p) in c.take_sent() {
                    cx.emit(port, p);
                }
                if let Some(p) = rest {
                    cx.emit(0, p.into_packet());
                }
                Verdict::Done
            }
        }
    }

    fn batching(&self) -> Batching {
        self.batching
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.counters()
    }

    fn model(&self) -> Option<Model> {
        self.model.map(|m| m())
    }

    fn declared(&self) -> Option<Declared> {
        self.declared.clone()
    }

    fn state_dump(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.stage.state(&mut out);
        out
    }
}

/// A class of operator NFs for the element registry: `name` in configurations, built by
/// `build` from the configuration's arguments, documented by `doc`. Register it with
/// [`register`] before configurations naming it are read.
pub const fn class(
    name: &'static str,
    build: elements::registry::Constructor,
    doc: Doc,
) -> ElementClass {
    ElementClass { name, build, doc }
}

/// Registers operator NF classes so configurations and chain files can name them; a class
/// registered again is a no-op.
pub fn register(classes: &[ElementClass]) -> Result<(), elements::registry::Taken> {
    classes
        .iter()
        .try_for_each(|c| elements::registry::register(*c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipe::pipe;
    use elements::registry::Doc;
    use elements::{Args, BuildCtx, ConfigError, Names};

    fn ttl_nf() -> impl Stage<Pkt<Raw, ()>, Out = impl Leave> + 'static {
        crate::pipe::tests::listing1()
    }

    fn build(
        name: &'static str,
        _: &Args,
        _: &BuildCtx<'_>,
    ) -> Result<Box<dyn Element>, ConfigError> {
        Ok(Box::new(OperatorNf::<_, ()>::new(name, 1, ttl_nf())))
    }

    const TEST_TTL: ElementClass = class(
        "TestTTLNF",
        build,
        Doc::new("", "The TTL NF of NetBricks' Listing 1 (test copy).", ""),
    );

    #[test]
    fn a_registered_operator_nf_builds_by_name_and_runs() {
        register(&[TEST_TTL]).unwrap();
        register(&[TEST_TTL]).unwrap();
        assert!(register(&[class("DecIPTTL", build, Doc::new("", "x", ""))]).is_err());
        let names = Names::default();
        let bcx = BuildCtx {
            name: "nf/t",
            ninputs: 1,
            noutputs: 1,
            names: &names,
            base_dir: std::path::Path::new("."),
        };
        let mut e = elements::build("TestTTLNF", "", &bcx).unwrap();
        assert_eq!(e.class_name(), "TestTTLNF");
        let mut cx = Context::default();
        let frame = wire::build::Frame::udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2)
            .ttl(2)
            .build();
        match e.push(0, Packet::from_bytes(&frame), &mut cx) {
            Verdict::Out(0, p) => assert_eq!(p.data()[22], 1),
            v => panic!("{v:?}"),
        }
        let frame = wire::build::Frame::udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2)
            .ttl(1)
            .build();
        match e.push(0, Packet::from_bytes(&frame), &mut cx) {
            Verdict::Drop(_, "ttl-expired") => {}
            v => panic!("{v:?}"),
        }
        assert!(e.model().is_none());
    }

    #[test]
    fn packets_an_nf_makes_are_counted_as_created_with_the_input_lineage() {
        // Every packet in leaves with a copy of itself made by the NF.
        let stage = pipe::<Raw, ()>().then(Echo).into_stage();
        let mut e = OperatorNf::<_, ()>::new("Echo", 2, stage);
        let mut cx = Context::default();
        let mut p = Packet::from_bytes(&[1, 2, 3]);
        p.meta.input_index = 7;
        p.meta.timestamp = packet::Timestamp(99);
        assert!(matches!(e.push(0, p, &mut cx), Verdict::Done));
        assert_eq!(cx.take_created(), 1);
        let out: Vec<_> = cx.take_emitted().collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0, 1);
        assert_eq!(out[0].1.meta.input_index, 7);
        assert_eq!(out[0].1.meta.timestamp, packet::Timestamp(99));
        assert_eq!(out[0].1.data(), &[3, 2, 1]);
    }

    /// Sends a reversed copy of each packet out of output 1, hands the packet on.
    struct Echo;

    impl Stage<Pkt<Raw, ()>> for Echo {
        type Out = Pkt<Raw, ()>;
        fn run(&mut self, p: Pkt<Raw, ()>, cx: &mut crate::Cx) -> Option<Pkt<Raw, ()>> {
            let mut bytes = p.data().to_vec();
            bytes.reverse();
            let copy = cx.create(Packet::from_bytes(&bytes));
            cx.send(1, copy);
            Some(p)
        }
    }
}
