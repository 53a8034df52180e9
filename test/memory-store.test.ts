// The conformance suite on the memory store, plus what only the memory store has: its bound and its timer.
import { expect } from 'chai';
import { MemoryStore } from '../src/index.js';
import { conformanceSuite } from './conformance/suite.js';

conformanceSuite({ name: 'MemoryStore', makeStore: (clock) => new MemoryStore({ clock }) });
