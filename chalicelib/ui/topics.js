// Topics: the list (paged: name, its endpoints, updated) and one topic's page (its
// endpoints in the order POST /jobs {"topic"} creates their jobs, each linked to the
// endpoint's page and to its jobs).

import { get, path } from './api.js';
import { facts, fill, h, link, section, table, when } from './dom.js';
import { pager } from './pager.js';

function endpointLinks(names) {
  const links = [];
  for (const name of names || []) {
    if (links.length) links.push(', ');
    links.push(link(name, ['endpoint', name]));
  }
  return h('span', null, links);
}

export async function topicsView(root, ctx) {
  const list = pager(ctx, '/topics', {}, (topics) =>
    table(['Name', 'Endpoints', 'Updated'], topics.map((t) => [
      link(t.name, ['topic', t.name]), endpointLinks(t.endpoints), when(t.updated_at),
    ]), 'No topic yet.'));
  root.append(h('h1', null, 'Topics'),
    h('p', null, 'POST /jobs with "topic" creates one job on each endpoint of the topic.'), list.el);
  await ctx.poll(list.load);
}

export async function topicView(root, ctx) {
  const [name] = ctx.args;
  const head = h('div');
  const endpoints = h('div');
  root.append(h('h1', null, 'Topic ', name), head, section('Endpoints', endpoints));
  await ctx.poll(async () => {
    const topic = await get(path('/topics/', name));
    fill(head, facts([['Endpoints', String(topic.endpoints.length)],
      ['Created', when(topic.created_at)], ['Updated', when(topic.updated_at)]]));
    fill(endpoints, table(['Endpoint', 'Jobs'], topic.endpoints.map((e) => [
      link(e, ['endpoint', e]), link('jobs', ['jobs'], { endpoint: e }),
    ])));
  });
}
