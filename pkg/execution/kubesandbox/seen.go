package kubesandbox

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// seenObjects holds objects of one kind in the backend's namespace as a
// watch of them last saw them, by name, while the watch runs (follow):
// claims take what they are bound to from it instead of asking the API
// server once more on their path (adopted, readPods). It knows nothing
// while no watch runs.
type seenObjects struct {
	mu      sync.Mutex
	byName  map[string]*unstructured.Unstructured
	changed chan struct{} // closed at the next change (changes)
}

// changes is a channel closed at the next change of what is held.
func (s *seenObjects) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// notify tells changes' channel; s.mu must be held.
func (s *seenObjects) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

func (s *seenObjects) get(name string) (*unstructured.Unstructured, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.byName[name]
	return u, ok
}

func (s *seenObjects) put(u *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string]*unstructured.Unstructured{}
	}
	s.byName[u.GetName()] = u
	s.notify()
}

func (s *seenObjects) drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName, name)
	s.notify()
}

// replace holds items instead of what was seen before (a list), or
// nothing (nil: the watch stopped).
func (s *seenObjects) replace(items []unstructured.Unstructured) {
	m := make(map[string]*unstructured.Unstructured, len(items))
	for i := range items {
		m[items[i].GetName()] = &items[i]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byName = m
	s.notify()
}

// follow lists res and watches it from the list on, holding what it sees,
// until ctx ends; a watch ends every minute and is started again after a
// new list (as one that fails is, a second later). on, when not nil, is
// called with every object listed (as Added) and every event's object,
// after it is held.
func (s *seenObjects) follow(ctx context.Context, res dynamic.ResourceInterface, on func(watch.EventType, *unstructured.Unstructured)) {
	defer s.replace(nil)
	for ctx.Err() == nil {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			s.replace(nil) // not known any more
			sleep(ctx, time.Second)
			continue
		}
		s.replace(list.Items)
		if on != nil {
			for i := range list.Items {
				on(watch.Added, &list.Items[i])
			}
		}
		timeout := int64(60)
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), TimeoutSeconds: &timeout})
		if err != nil {
			s.replace(nil)
			sleep(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				s.put(u)
			case watch.Deleted:
				s.drop(u.GetName())
			default:
				continue
			}
			if on != nil {
				on(ev.Type, u)
			}
		}
		w.Stop()
	}
}
