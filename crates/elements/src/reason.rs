//! Drop reasons: each element's reasons as an enum, each reason's text written once.
//!
//! An element declares why it drops packets with [`reasons!`](crate::reasons): an enum whose
//! variants carry the short kebab-case text (`bad-ip-version`) the executor counts drops
//! under and prints. `push` ([`crate::Verdict::Drop`], [`crate::Context::drop`]), the
//! element's model ([`crate::model::Outcome::Drop`], [`crate::model::Case::stat`]), its
//! `stats()` and its registry documentation ([`crate::registry::Doc`]'s drops, from the
//! enum's `TEXTS`) all take the text from the enum, so none of them can spell it
//! differently. The counters keep `&'static str` keys: a reason converts to its text with
//! `.into()` or [`as_str`](IpHeaderReason::as_str), both compile-time constants (no
//! allocation, no dispatch).
//!
//! Reasons several elements share live here, one enum each: [`IpHeaderReason`] (no valid
//! IPv4 header at the network header annotation), [`FlowReason`] (packets a flow element
//! cannot key), [`MatchReason`], [`OutputReason`], [`InputReason`], [`RouteReason`] and
//! [`LengthReason`]. An element whose per-reason counters are one array (`CheckIPHeader`)
//! lists a shared reason in its own enum with the shared enum's text
//! (`BadHeader => IpHeaderReason::Bad.as_str()`), so the text is still written once.

/// Declares a drop-reason enum: each variant with its text (a `&'static str` constant
/// expression, usually a literal).
///
/// ```
/// use elements::reason::IpHeaderReason;
/// elements::reasons! {
///     /// Why `CheckIPHeader` rejects a packet.
///     pub enum CheckIpReason {
///         /// Fewer than 20 bytes after OFFSET.
///         Tiny => "tiny-packet",
///         /// An IHL below 5.
///         BadHeader => IpHeaderReason::Bad.as_str(),
///     }
/// }
/// assert_eq!(CheckIpReason::TEXTS, ["tiny-packet", "bad-ip-header"]);
/// let text: &'static str = CheckIpReason::Tiny.into();
/// assert_eq!(text, "tiny-packet");
/// assert_eq!(CheckIpReason::BadHeader as usize, 1);
/// ```
///
/// generates the enum (`Debug, Clone, Copy, PartialEq, Eq, Hash`, variants numbered from 0 in
/// declaration order, so `reason as usize` indexes per-reason counters), `ALL` (every variant
/// in that order), `TEXTS` (their texts, in that order: what the registry documents),
/// `const fn as_str`, `Display` (the text) and `From<Enum> for &'static str`.
#[macro_export]
macro_rules! reasons {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident => $text:expr
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                #[doc = concat!("\n\nCounted and printed as `", stringify!($text), "`.")]
                $variant,
            )+
        }

        impl $name {
            /// Every reason, in declaration order (`reason as usize` is its index).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The reasons' texts, in declaration order (`TEXTS[reason as usize]`).
            pub const TEXTS: &'static [&'static str] = &[$($text),+];

            /// The text drops under this reason are counted and printed under.
            #[inline(always)]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::core::convert::From<$name> for &'static str {
            #[inline(always)]
            fn from(r: $name) -> &'static str {
                r.as_str()
            }
        }
    };
}

reasons! {
    /// Why an element that reads the IPv4 header at the network header annotation drops a
    /// packet without a usable one (the IP family, `ICMPError`, the rewriters, `Maglev`).
    pub enum IpHeaderReason {
        /// No network header annotation.
        Missing => "no-ip-header",
        /// Fewer than 20 bytes at the annotation, an IHL below 5 or a header longer than the
        /// bytes there (for the rewriters, `ICMPError` and `Maglev`: also no annotation).
        Bad => "bad-ip-header",
    }
}

reasons! {
    /// Why a flow element (the rewriters, `MazuNAT`, `Maglev`) refuses a packet it cannot
    /// key by its 5-tuple.
    pub enum FlowReason {
        /// Neither TCP nor UDP.
        NotTcpUdp => "not-tcp-udp",
        /// A non-first fragment (no ports).
        Fragment => "ip-fragment",
        /// Fewer transport bytes than the ports (UDP 8, TCP 20).
        ShortTransport => "short-transport",
    }
}

reasons! {
    /// Why a classifier (`Classifier`, `IPClassifier`, `IPFilter`, `PcapFilter`) drops a
    /// packet.
    pub enum MatchReason {
        /// No pattern matched.
        NoMatch => "no-match",
    }
}

reasons! {
    /// Why a switch (`Switch`, `StaticSwitch`, `PaintSwitch`, `RoundRobinSwitch`) drops a
    /// packet.
    pub enum OutputReason {
        /// The chosen output does not exist.
        NoOutput => "no-output",
    }
}

reasons! {
    /// Why an element without inputs (`AddressInfo` and the other declarative elements,
    /// `RoundRobinIPMapper`) drops a packet pushed to it anyway.
    pub enum InputReason {
        /// The element has no input.
        NoInput => "no-input",
    }
}

reasons! {
    /// Why a route lookup (`RadixIPLookup` and its synonyms, `LookupIP6Route`) drops a packet.
    pub enum RouteReason {
        /// No route for the destination.
        NoRoute => "no-route",
    }
}

reasons! {
    /// Why an element writing Ethernet addresses (`EtherRewrite`, `StoreEtherAddress`) drops
    /// a packet.
    pub enum LengthReason {
        /// The packet ends before the bytes written.
        TooShort => "too-short",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    reasons! {
        /// A test enum with an alias.
        enum Sample {
            First => "first-reason",
            Alias => IpHeaderReason::Bad.as_str(),
        }
    }

    #[test]
    fn the_generated_items_agree() {
        assert_eq!(Sample::ALL, [Sample::First, Sample::Alias]);
        assert_eq!(Sample::TEXTS, ["first-reason", "bad-ip-header"]);
        for (i, r) in Sample::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert_eq!(r.as_str(), Sample::TEXTS[i]);
            assert_eq!(r.to_string(), Sample::TEXTS[i]);
            let s: &'static str = (*r).into();
            assert_eq!(s, Sample::TEXTS[i]);
        }
        const C: &str = IpHeaderReason::Missing.as_str();
        assert_eq!(C, "no-ip-header");
    }
}
